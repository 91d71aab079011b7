# Every entry point of Epochal. `make install` creates .venv and installs everything (idempotent);
# the other targets depend on it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard protos/epochal/wire/v1/*.proto)
SEEDS ?= 300
SEED ?=
BUG ?=
HISTORY_SECONDS ?= 90
HISTORY_RUNS ?= 5
FUZZ_INPUTS ?= 20000
FUZZ_SEED ?= 0

.PHONY: install deps run test lint format protos sim history fuzz bench bench-analytics prometheus analyze clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,analytics]'
	touch $(STAMP)

# The Debian packages the suite needs, installed when missing (as root: CI is): Prometheus and
# promtool (the scrape and alert tests, `make prometheus`; its own service is not started:
# policy-rc.d), a Java runtime for PySpark (the analytics job and its test), and Chromium with
# its driver (the analytics dashboard opened in a real browser).
deps:
	@missing=""; \
	if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then \
		missing="prometheus"; \
	fi; \
	if ! command -v java >/dev/null 2>&1; then missing="$$missing openjdk-17-jre-headless"; fi; \
	if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
		missing="$$missing chromium chromium-driver"; \
	fi; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "make deps: Debian's$$missing missing and this is not root: run" \
				"'sudo make deps' (or install them); the tests that need them fail" >&2; \
			exit 0; \
		fi; \
		echo "installing Debian's$$missing (for the tests, make prometheus and make analyze)"; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			trap 'rm -f /usr/sbin/policy-rc.d' EXIT INT TERM; \
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; \
			chmod +x /usr/sbin/policy-rc.d; \
		fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$missing >/dev/null; \
	fi

run: install
	$(PY) -m epochal.devcluster

test: install deps lint
	$(PY) -m pytest tests

# A real Prometheus scraping the dev cluster that `make run` (or `epochal dev up`) started in
# var/devcluster, with the alert rules loaded: http://127.0.0.1:9090 (PROMETHEUS_LISTEN).
PROMETHEUS_LISTEN ?= 127.0.0.1:9090
prometheus: install deps
	prometheus --config.file=deploy/prometheus/prometheus.yml --storage.tsdb.path=var/prometheus \
		--web.listen-address=$(PROMETHEUS_LISTEN)

# The trace analytics job (epochal.analytics) on a folder of span files, by default the ones
# `make run` leaves; the tables go to ANALYTICS_OUT. ARGS passes flags (--master, --window, …).
TRACES ?= var/devcluster/traces
ANALYTICS_OUT ?= var/analytics
analyze: install deps
	$(PY) -m epochal.analytics $(TRACES) --out $(ANALYTICS_OUT) $(ARGS)

# mypy runs in the package tree the editable install's import hook hides from it.
MYPY_TREE := build/mypy
SDK_PUBLIC := epochal epochal.client epochal.sync_client epochal.profiles epochal.policies \
	epochal.calls epochal.routing epochal.errors epochal.results epochal.ddl

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) .ci/mypy_tree.py $(MYPY_TREE)
	cd $(MYPY_TREE) && $(abspath $(PY)) -m mypy --config-file $(CURDIR)/pyproject.toml \
		epochal/*.py epochal/cli/*.py
	cd $(MYPY_TREE) && $(abspath $(PY)) -m mypy --config-file $(CURDIR)/pyproject.toml \
		--strict $(addprefix -m ,$(SDK_PUBLIC))

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

protos: install
	$(PY) -m epochal.wire.codegen libs/wire/v1

sim: install
ifeq ($(SEED),)
	$(PY) -m epochal.sim.cli --seeds $(SEEDS)
else
	$(PY) -m epochal.sim.cli --seed $(SEED) --trace $(if $(BUG),--bug $(BUG))
endif

# The history check of QUORUM reads under replica kills and pauses, longer and several times
# in a row (CI runs one short run as part of `make test`).
history: install
	EPOCHAL_HISTORY_SECONDS=$(HISTORY_SECONDS) EPOCHAL_HISTORY_RUNS=$(HISTORY_RUNS) \
		$(PY) -m pytest tests/integration/test_history.py -s -p no:cacheprovider

# The fuzz test of every gRPC method, long (CI runs a short one as part of `make test`).
fuzz: install
	EPOCHAL_FUZZ_INPUTS=$(FUZZ_INPUTS) EPOCHAL_FUZZ_SEED=$(FUZZ_SEED) \
		$(PY) -m pytest tests/integration/test_fuzz.py -s -p no:cacheprovider

bench: install deps
	for b in bench/[!_]*.py; do $(PY) $$b || exit 1; done

# the analytics benchmark runs Spark: Java from `make deps`
bench-analytics: install deps
	$(PY) bench/analytics.py $(ARGS)

bench-%: install
	$(PY) bench/$*.py $(ARGS)

clean-venv:
	rm -rf $(VENV)
