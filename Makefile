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

## Download pycuda's sdist and its pure-Python dependencies (wheels for CPython 3.12) into .whl/,
## for building pycuda on a GPU machine without network (see benchmarks/gpu/README.md).
gpu-wheels: $(STAMP)
	mkdir -p .git/info .whl
	grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
	$(PY) -m pip install -q setuptools wheel pytools
	# the sdist's metadata step needs CUDA unless it reuses this venv's build tools
	$(PY) -m pip download -q --no-deps --no-build-isolation --no-binary pycuda -d .whl pycuda==2026.1
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  --platform any -d .whl pytools platformdirs mako markupsafe siphash24 typing_extensions setuptools wheel islpy
	# cgen publishes no wheel: build its pure-Python wheel here
	$(PY) -m pip wheel -q --no-deps -w .whl cgen
