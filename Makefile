# Two entry points for a fresh machine (Python 3.11+, a JDK, the package registries):
#   make run   - create .venv if missing, install rocketq, start its main job on an embedded default
#   make test  - create/refresh .venv, install test dependencies, run the whole suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
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
	$(VENV)/bin/rocketq serve

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(VENV)/bin/rocketq bench compare

bench-store: $(VENV)/.installed
	$(VENV)/bin/rocketq bench store

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
