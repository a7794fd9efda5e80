#!/usr/bin/env bash
# System packages the test suite needs that pip cannot provide: a Java runtime (17+) for PySpark.
# Installed with apt-get when missing; a machine that already has them is left alone.
set -euo pipefail
need_java=1
if command -v java >/dev/null 2>&1; then
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  if [ -n "$major" ] && [ "$major" -ge 17 ]; then need_java=0; fi
fi
if [ "$need_java" = 1 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing a Java runtime for PySpark" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "warning: no Java 17+ found; PySpark tests will be skipped" >&2
  fi
fi
# libnats (nats.c), pkg-config and a C compiler: tests/acceptance/test_compat_libnats.py compiles C
# clients against them.
if ! { command -v cc >/dev/null 2>&1 && command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libnats; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing libnats-dev, pkg-config and gcc for the nats.c compatibility tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnats-dev pkg-config gcc libc6-dev >/dev/null
  else
    echo "warning: libnats-dev/pkg-config/cc missing; nats.c compatibility tests will be skipped" >&2
  fi
fi
# node + npm: tests/acceptance/test_compat_natsjs.py installs nats.js from the npm registry with them.
if ! { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing nodejs and npm for the nats.js compatibility tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "warning: node/npm missing; nats.js compatibility tests will be skipped" >&2
  fi
fi
# chromium: tests/integration/test_dashboard.py and `make screenshot` drive it headless with playwright
# (playwright's own browser download is not used).
if ! { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing chromium for the dashboard browser test" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: chromium missing; the dashboard browser test will be skipped" >&2
  fi
fi
# The Python headers: `make compiled` (run by `make test`) compiles natsd's hot modules with mypyc.
# python.org/pyenv builds ship them; a distribution's python3 needs its -dev package.
if ! python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing python3-dev for the compiled build (make compiled)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-dev >/dev/null
  else
    echo "warning: Python.h missing; make compiled (and make test's compiled pass) will fail" >&2
  fi
fi
# mosquitto_pub / mosquitto_sub: tests/acceptance/test_mqtt_mosquitto.py drives the MQTT port with Debian's
# mosquitto-clients (a second, non-Python MQTT client).
if ! { command -v mosquitto_pub >/dev/null 2>&1 && command -v mosquitto_sub >/dev/null 2>&1; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing mosquitto-clients for the MQTT acceptance tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto-clients >/dev/null
  else
    echo "warning: mosquitto-clients missing; the MQTT mosquitto tests will be skipped" >&2
  fi
fi
