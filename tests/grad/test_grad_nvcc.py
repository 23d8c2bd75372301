"""Gradient kernels' CUDA compiles with nvcc, without a GPU: the library's backward passes (saved
and recomputing, factored sums included) and a checkpointed reverse sweep, under the automatic GPU
schedule.  The GPU runs themselves are in test_grad_gpu.py; cuda-emu runs them everywhere."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import polyc as pc
from kernels import by_name
from polyc.codegen.cuda import generate_cuda
from polyc.codegen.typing import resolve_typing
from polyc.errors import CompileError
from polyc.runtime.cuda import compile_cuda_check
from polyc.schedule.auto_gpu import auto_gpu_schedule

from ..cuda.conftest import needs_nvcc

#: (library kernel, saved, checkpoint)
CASES = [("matmul", (), None), ("conv2d", (), None), ("softmax", ("Y", "s"), None),
         ("layernorm", (), None), ("layernorm", ("mean", "var"), None), ("jacobi-1d", (), "store")]


def _source(name, saved, checkpoint) -> str:
    lk = by_name(name)
    prog = lk.kernel.program
    if checkpoint:
        g = pc.grad(lk.kernel, of="A", wrt=["A"], checkpoint=checkpoint)
    else:
        of = next(t.name for t in prog.tensors if t.role == "output")
        g = pc.grad(lk.kernel, of=of, wrt=[t.name for t in prog.tensors if t.role == "input"], saved=saved)
    d = pc.f32 if "f32" in lk.dtypes else pc.f64
    typing = resolve_typing(g.program, {t.name: d for t in g.program.tensors if t.role in ("input", "inout")},
                            default=d)
    return generate_cuda(auto_gpu_schedule(g.schedule()), typing).source


@needs_nvcc
def test_gradient_kernels_compile_with_nvcc():
    def one(case):
        try:
            compile_cuda_check(_source(*case), "sm_80")
            return None
        except CompileError as e:
            return f"{case}:\n{e}"
    with ThreadPoolExecutor(3) as ex:
        errors = [e for e in ex.map(one, CASES) if e]
    assert not errors, "\n\n".join(errors)


def test_factored_sums_appear_in_the_cuda_source():
    """The layernorm backward's factored sums are real arrays of the CUDA program too."""
    src = _source("layernorm", ("mean", "var"), None)
    assert "mean_grad_sum" in src and "__global__" in src
