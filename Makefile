# Two commands set up a fresh machine from nothing:
#   make run   - create .venv, install, start the server (kudusql serve: Postgres wire protocol on
#                127.0.0.1:5433, embedded single node, data in ./kudusql-data)
#   make test  - create .venv, install with test extras, run the default test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: venv run test test-long bench clean

# setup.py and native/*.pyx: the compiled core is rebuilt (pip install -e) when they change
$(VENV)/.installed: pyproject.toml setup.py $(wildcard native/*.pyx)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

venv: $(VENV)/.installed

run: venv
	$(PY) -m kudusql serve --data-dir ./kudusql-data

# KUDUSQL_REQUIRE_NATIVE=1: a compiled core that failed to build is an error here, not a
# silent fall-back to the pure-Python twins (tests/test_native.py runs those on purpose)
test: venv
	KUDUSQL_REQUIRE_NATIVE=1 $(PY) -m pytest -q --durations=30

test-long: venv
	KUDUSQL_REQUIRE_NATIVE=1 KUDUSQL_LONG=1 $(PY) -m pytest -q

bench: venv
	$(PY) -m bench.engine_bench --sf 1

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache native/*.c native/*.so
