#!/usr/bin/env bash
# Build pycuda (and install polyc's pure-Python dependencies) into a site folder on a GPU machine
# without network, from the files `make gpu-wheels` put into .whl/.  Usage (repository root):
#   bash benchmarks/gpu/build_pycuda.sh [SITE]     # SITE defaults to /tmp/site
# then: export PYTHONPATH=SITE:$PWD
set -euo pipefail
SITE=${1:-/tmp/site}
PY=${PYTHON:-python3}
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$NVCC" ] || { echo "nvcc not found"; exit 1; }
export PATH=$(dirname "$NVCC"):$PATH
LIBCUDA=$(ldconfig -p | awk '/libcuda.so /{print $NF; exit}')
[ -n "$LIBCUDA" ] || LIBCUDA=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')
LIBDIR=$(dirname "$LIBCUDA")
# pycuda links against libcuda.so; some drivers only ship libcuda.so.1: give it a linker name.
if [ ! -e "$LIBDIR/libcuda.so" ]; then
  mkdir -p /tmp/libcuda-link && ln -sf "$LIBCUDA" /tmp/libcuda-link/libcuda.so && LIBDIR=/tmp/libcuda-link
fi
mkdir -p "$SITE"
$PY -m pip install -q --no-deps --no-index --no-build-isolation --find-links .whl --target "$SITE" \
  pytools platformdirs mako markupsafe siphash24 typing_extensions islpy cgen
# A pycuda wheel built earlier (on a machine like this one) is reused; else build it from the sdist
# (~2 min) and keep the wheel in .whl/ so the next lease can skip the build.
if ! ls .whl/pycuda-*.whl >/dev/null 2>&1; then
  CURAND=()
  CUDA_ROOT=$(dirname "$(dirname "$NVCC")")
  [ -e "$CUDA_ROOT/include/curand.h" ] || CURAND=(--config-settings=--build-option=--conf:CUDA_ENABLE_CURAND=False)
  # setuptools shlex-splits --build-option: the inner quotes keep the list item a Python string literal
  PYTHONPATH="$SITE" $PY -m pip wheel -q --no-deps --no-index --no-build-isolation --find-links .whl -w .whl \
    "--config-settings=--build-option=--conf:CUDADRV_LIB_DIR=[\"'$LIBDIR'\"]" "${CURAND[@]}" .whl/pycuda-*.tar.gz
fi
$PY -m pip install -q --no-deps --no-index --target "$SITE" .whl/pycuda-*.whl
PYTHONPATH="$SITE" $PY -c "import pycuda.autoprimaryctx, pycuda.driver as d; print('pycuda OK on', d.Context.get_device().name())"
