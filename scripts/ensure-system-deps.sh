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
