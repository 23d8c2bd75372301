# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: demo test test-all bench bench-polybench setup clean gpu-wheels

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m ipykernel install --user --name polyc-venv >/dev/null 2>&1 || true
	touch $(STAMP)

setup: $(STAMP)

## Compile, verify and time every kernel of the library; prints a table.
demo: $(STAMP)
	$(PY) -m benchmarks.demo

## The default test suite (lean: slow groups are marked and left to `make test-all`).
test: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) -m "not slow and not gpu"

test-all: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) -m "not gpu"

bench: $(STAMP)
	$(PY) -m benchmarks.cpu

bench-polybench: $(STAMP)
	$(PY) -m benchmarks.polybench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
