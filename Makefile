# Entry points for a fresh checkout (prerequisites: README.md, "Prerequisites"):
#   make run   - create .venv if missing, install rocketq, run `rocketq serve` (ARGS='--profile small' ...)
#   make test  - create/refresh .venv, install the test, bench and spark extras, run the whole suite
#   make bench - rocketq beside Redis, NATS and RabbitMQ (`rocketq bench compare`)
# `. .venv/bin/activate` (or ./rocketq) then puts the rocketq command at hand in another shell.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=
STAMP  := $(VENV)/.installed-test

.PHONY: run test bench bench-store clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e .
	touch $@

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e '.[test,bench,spark]'
	touch $@

run: $(VENV)/.installed
	$(VENV)/bin/rocketq serve $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(VENV)/bin/rocketq bench compare

bench-store: $(VENV)/.installed
	$(VENV)/bin/rocketq bench store

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
