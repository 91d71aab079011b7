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

.PHONY: install run test lint format protos sim bench clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(PY) -m epochal.replica.devcluster

test: install lint
	$(PY) -m pytest tests

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

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

bench: install
	for b in bench/[!_]*.py; do $(PY) $$b || exit 1; done

bench-%: install
	$(PY) bench/$*.py $(ARGS)

clean-venv:
	rm -rf $(VENV)
