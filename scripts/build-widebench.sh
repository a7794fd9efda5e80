#!/usr/bin/env bash
# Builds the project's wide-workload load generator (bench/c/widebench.c, libnats) into ./bench/bin/widebench.
set -euo pipefail
src=bench/c/widebench.c
mkdir -p bench/bin
if ! pkg-config --exists libnats 2>/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnats-dev pkg-config >/dev/null
fi
if [ ! -x bench/bin/widebench ] || [ "$src" -nt bench/bin/widebench ]; then
  cc -O2 -Wall -pthread "$src" -o bench/bin/widebench $(pkg-config --cflags --libs libnats)
fi
echo bench/bin/widebench
