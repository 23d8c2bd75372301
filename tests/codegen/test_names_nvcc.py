"""CUDA generated for kernels with hostile names compiles with nvcc (CUDA is C++: its keywords too)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import polyc as pc
from polyc.runtime.cuda import compile_cuda_check, find_nvcc

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (CUDA toolkit) is not installed here")

#: Tensors `new`, `class`, `threadIdx`, `float4`, `NAN`; indices `this`, `template`, `dim3`; scalars
#: `main`, `int`, `__syncthreads`; sizes derived from the indices (`THIS`, `TEMPLATE`, `DIM3`).
KERNEL = ("new[this, template] +=! class[this, dim3] * threadIdx[dim3, template] * main\n"
          "float4[this, template] = new[this, template] * int - __syncthreads + NAN[this, template]")


@needs_nvcc
@pytest.mark.parametrize("schedule", [None, pytest.param("auto", marks=pytest.mark.slow)], ids=["source", "auto"])
def test_cuda_for_hostile_names_compiles_with_nvcc(schedule):
    k = pc.kernel(KERNEL, name="template")
    sources = [pc.codegen(k, schedule, target="cuda", dtypes=dict.fromkeys(["class", "threadIdx", "NAN"], dt))
               for dt in (pc.f32, pc.f64)]
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda src: compile_cuda_check(src, "sm_90"), sources))
