#!/usr/bin/env bash
# Builds the project's scaling-table client (bench/c/scalebench.c, libnats) into ./bench/bin/scalebench.
set -euo pipefail
src=bench/c/scalebench.c
mkdir -p bench/bin
if ! pkg-config --exists libnats 2>/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnats-dev pkg-config >/dev/null
fi
if [ ! -x bench/bin/scalebench ] || [ "$src" -nt bench/bin/scalebench ]; then
  cc -O2 -Wall -pthread "$src" -o bench/bin/scalebench $(pkg-config --cflags --libs libnats)
fi
echo bench/bin/scalebench
