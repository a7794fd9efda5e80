#!/usr/bin/env bash
# Builds the C load generators (libnats) used by the benchmarks into ./bench/bin: jsbench, and jsmany
# (bench/c/jsmany.c: JetStream publishes over many subjects, the plgd-shaped workload; issue 31).
set -euo pipefail
src="${JSBENCH_SRC:-../shared/tools/jsbench/jsbench.c}"
mkdir -p bench/bin
if ! pkg-config --exists libnats 2>/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnats-dev pkg-config >/dev/null
fi
if [ ! -x bench/bin/jsbench ] || [ "$src" -nt bench/bin/jsbench ]; then
  cc -O2 "$src" -o bench/bin/jsbench $(pkg-config --cflags --libs libnats)
fi
if [ ! -x bench/bin/jsmany ] || [ bench/c/jsmany.c -nt bench/bin/jsmany ]; then
  cc -O2 bench/c/jsmany.c -o bench/bin/jsmany $(pkg-config --cflags --libs libnats)
fi
echo bench/bin/jsbench
