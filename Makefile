# Entry points for a fresh checkout (prerequisites: README.md, "Prerequisites"; Rust with cargo builds the
# native extension):
#   make run    - create .venv if missing, install rocketq, run `rocketq serve` (ARGS='--store-profile small' ...)
#   make test   - create/refresh .venv, install the test, bench and spark extras, run the whole suite
#                 (as root it first apt-get installs Debian's chromium and chromium-driver when missing, for the
#                 console's browser tests; otherwise those tests skip and say why; likewise Debian's
#                 etcd-server and iproute2 for the controller's failover tests, tests/controller)
#   make bench  - rocketq beside Redis, NATS and RabbitMQ (`rocketq bench compare`)
#   make native - rebuild only the extension (native/, Rust) into src/rocketq/ after editing it
# `. .venv/bin/activate` (or ./rocketq) then puts the rocketq command at hand in another shell.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=
# pytest-xdist workers for `make test` (the suite waits on servers, JVMs and fsyncs much of the time)
TEST_WORKERS ?= 2
STAMP  := $(VENV)/.installed-test
NATIVE := native/Cargo.toml native/Cargo.lock $(shell find native/src -name "*.rs")

.PHONY: run test bench bench-store native clean browser etcd

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

test: $(STAMP) browser etcd
	$(PY) -m pytest -q -n $(TEST_WORKERS)

# Debian's chromium and its driver for tests/console/test_console_browser.py (never a downloaded browser build);
# only as root and only when missing - anywhere else the browser tests skip with the reason
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null \
		|| echo "make: chromium not installed; the console's browser tests will skip"; \
	else echo "make: no chromium and not root; the console's browser tests will skip"; fi

# Debian's etcd (3.4) for the controller tests: they start their own three-member clusters on loopback
# with temp data dirs; `ip` (iproute2) makes the partition test's network namespace
etcd:
	@if command -v etcd >/dev/null && command -v ip >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client iproute2 >/dev/null \
		|| echo "make: etcd not installed; the controller tests will skip"; \
	else echo "make: no etcd and not root; the controller tests will skip"; fi

bench: $(STAMP)
	$(VENV)/bin/rocketq bench compare

bench-store: $(VENV)/.installed
	$(VENV)/bin/rocketq bench store

# as maturin builds it (pip install): the cdylib alone, so that the release profile's fat LTO applies
# (`cargo build` of the cdylib + rlib crate types made a larger, 16-24 % slower library)
native: $(PY)
	cd native && cargo rustc --release --features extension-module --lib --crate-type cdylib
	cp native/target/release/lib_native.so src/rocketq/_native$$($(PY) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache native/target src/rocketq/_native*.so
