# Entry points for a fresh checkout (prerequisites: README.md, "Prerequisites"; Rust with cargo builds the
# native extension):
#   make run    - create .venv if missing, install rocketq, run `rocketq serve` (ARGS='--store-profile small' ...)
#   make test   - create/refresh .venv, install the test, bench and spark extras, run the whole suite
#   make bench  - rocketq beside Redis, NATS and RabbitMQ (`rocketq bench compare`)
#   make native - rebuild only the extension (native/, Rust) into src/rocketq/ after editing it
# `. .venv/bin/activate` (or ./rocketq) then puts the rocketq command at hand in another shell.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=
STAMP  := $(VENV)/.installed-test
NATIVE := native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)

.PHONY: run test bench bench-store native clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml $(NATIVE)
	$(PY) -m pip install --quiet -e .
	touch $@

$(STAMP): $(PY) pyproject.toml $(NATIVE)
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

native: $(PY)
	cd native && cargo build --release --features extension-module
	cp native/target/release/lib_native.so src/rocketq/_native$$($(PY) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache native/target src/rocketq/_native*.so
