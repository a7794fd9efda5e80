# natsd: every target bootstraps .venv/ idempotently (a stamp file tracks pyproject.toml),
# so `make run` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS ?= server,test,bench,spark

.PHONY: install run test test-unit test-integration test-acceptance lint format compiled test-compiled bench-compiled bench bench-wide jsbench widebench screenshot clean

install: $(STAMP)

$(STAMP): pyproject.toml scripts/ensure-system-deps.sh
	bash scripts/ensure-system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

# Embedded defaults: client port 4222, monitoring 8222, JetStream on with its store under ./data.
run: $(STAMP)
	$(BIN)/natsd -p 4222 -m 8222 -js -sd ./data

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests
	$(MAKE) test-compiled

# The opt-in compiled build of the hot modules (natsd/_compiled.py): mypyc, into build/compiled, never
# into src/. Use it with NATSD_COMPILED=build/compiled (e.g. `NATSD_COMPILED=build/compiled make run`);
# natsd falls back to pure Python, with a warning at startup, when it no longer matches the sources.
COMPILED_DIR ?= build/compiled
compiled: $(STAMP)
	$(BIN)/python scripts/build_compiled.py --out $(COMPILED_DIR)

# The tests of the compiled modules and of the core paths through them, against a fresh build (the
# whole suite runs against pure Python above); tests/conftest.py fails the run if the build is not used.
COMPILED_TESTS ?= tests/unit/protocol tests/unit/subjects tests/unit/server tests/unit/test_compiled.py \
	tests/integration/test_core_pubsub.py tests/integration/test_raw_protocol.py \
	tests/integration/test_core_monitor.py tests/integration/test_js_publish_runs.py \
	tests/integration/test_js_ack_runs.py tests/integration/test_leaf_queue_weights.py \
	tests/integration/test_js_publish_reply_runs_reference.py
test-compiled: compiled
	NATSD_COMPILED=$(COMPILED_DIR) $(BIN)/python -m pytest -q -p no:cacheprovider $(COMPILED_TESTS)

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

test-integration: $(STAMP)
	$(BIN)/python -m pytest -q tests/integration

test-acceptance: $(STAMP)
	$(BIN)/python -m pytest -q tests/acceptance

# ruff ([tool.ruff] in pyproject.toml; `make test` runs both checks through tests/unit/test_lint.py).
lint: $(STAMP)
	$(BIN)/python -m ruff check src tests
	$(BIN)/python -m ruff format --check src tests

format: $(STAMP)
	$(BIN)/python -m ruff format src tests

# What the compiled build pays, pure vs compiled in-process (CPU per message): see bench/bench_compiled.py.
bench-compiled: $(STAMP) compiled
	$(BIN)/python bench/bench_compiled.py --build $(COMPILED_DIR)

# Benchmarks compare natsd with nats-server in one run; see bench/README.md.
jsbench: $(STAMP)
	bash scripts/build-jsbench.sh

widebench: $(STAMP)
	bash scripts/build-widebench.sh

bench: $(STAMP) jsbench widebench
	$(BIN)/python bench/run.py
	$(BIN)/python bench/run_wide.py

# The wider workload set of issue 15 alone, e.g. make bench-wide WIDE_ARGS="--runs 3".
bench-wide: $(STAMP) widebench
	$(BIN)/python bench/run_wide.py $(WIDE_ARGS)

# A screenshot of the live dashboard (natsd with some traffic, headless chromium) for the README.
screenshot: $(STAMP)
	$(BIN)/python scripts/dashboard_screenshot.py --out docs/dashboard.png

clean:
	rm -rf $(VENV) build dist src/*.egg-info
