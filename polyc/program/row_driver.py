"""Row blocks in one C loop: the blocks of a program's row loop (`row_loop`) run inside a single
OpenMP region that calls each group's compiled kernel directly, block after block.

Why.  Blocks run from Python pay a kernel call's Python overhead (binding, pointers, the GIL) for
every group of every block, and on several threads a Python thread pool's wake-up and GIL hand-offs
besides: the attention head at S=1024 on two threads took 1.1-2.1 ms in blocks against 0.9 ms whole.
Here the calls are replayed from C: one parallel region over the blocks, each thread running its
run of blocks with a serial team for the kernels' own regions (`omp_set_num_threads(1)` inside
the region sets it for that thread's nested regions only), on buffers of its own.

How.  `record` binds each group's call once for a full block and once for the last, shorter one
(`bind_arguments`, so every argument is checked as for any call), and notes where each C argument
comes from: the start of an array of the call (`env`), row `r0` of one (`rows`: the block's
rows of a tensor sliced by rows, or of an output), a buffer of the running thread (`local`: the
intermediates between the groups and the kernels' temps), or a number (sizes, scalars).  The C
source depends only on that structure, not on sizes or addresses, so one compiled driver serves
every size and process (the compile cache keys it by its text); the addresses come per call.
"""
from __future__ import annotations

import ctypes
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..ir.expr import REDUCTION_IDENTITY
from ..runtime.arguments import bind_arguments
from ..runtime.compiler import compile_c
from ..runtime.interpreter import UPDATE_UFUNCS
from ..runtime.loader import load_library
from ..runtime.ready_call import data_pointer
from .fusion import Group
from ..runtime.aligned import aligned_bytes
from .row_loop import RowLoop, block_arrays

#: The driver's exported function.
SYMBOL = "polyc_row_loop"


@dataclass(frozen=True)
class Arg:
    """Where one C argument of a replayed call comes from: `kind` "env" (an array's start), "rows"
    (row r0 of an array), "local" (the running thread's buffer) or "int" (a size); `index` into
    the matching table; `ctype` the parameter's C type."""

    kind: str
    index: int
    ctype: str

    def c_expression(self) -> str:
        return f"({self.ctype}){_C_SOURCE[self.kind].format(i=self.index)}"


#: The C text of each kind of argument source, `{i}` its index.
_C_SOURCE = {"env": "pc_env[{i}]", "rows": "(pc_env[{i}] + pc_r0 * pc_row[{i}])", "local": "pc_my[{i}]",
             "int": "pc_int[{i}]"}


@dataclass(frozen=True)
class Call:
    """One kernel call of a block: the function (an index into the function table) and its args."""

    function: int
    args: Tuple[Arg, ...]

    def c_statement(self) -> str:
        prototype = ", ".join(a.ctype for a in self.args) or "void"
        actual = ", ".join(a.c_expression() for a in self.args)
        return f"((void (*)({prototype}))pc_fn[{self.function}])({actual});"


def driver_source(full: Sequence[Call], tail: Sequence[Call]) -> str:
    """The C driver: blocks of `pc_rows` rows of `pc_total`, dealt out in contiguous runs, one per
    thread; `full` is a whole block's calls, `tail` the last block's when it is shorter."""
    def body(calls: Sequence[Call]) -> str:
        return "\n".join("        " + c.c_statement() for c in calls)
    blocks = body(full) if tail == full else (
        f"      if (pc_r0 + pc_rows <= pc_total) {{\n{body(full)}\n      }} else {{\n{body(tail)}\n      }}")
    return f"""#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static void pc_run(char *const *pc_env, const int64_t *pc_row, char *const *pc_my, const int64_t *pc_int,
                   void *const *pc_fn, int64_t pc_total, int64_t pc_rows,
                   int64_t pc_first, int64_t pc_last) {{
    for (int64_t pc_b = pc_first; pc_b < pc_last; pc_b++) {{
      const int64_t pc_r0 = pc_b * pc_rows;
{blocks}
    }}
}}

void {SYMBOL}(char *const *pc_env, const int64_t *pc_row, char *const *pc_local, int64_t pc_nlocal,
              const int64_t *pc_int, void *const *pc_fn, int64_t pc_total,
              int64_t pc_rows, int64_t pc_threads) {{
    const int64_t pc_blocks = (pc_total + pc_rows - 1) / pc_rows;
    if (pc_threads <= 1) {{   /* one run of blocks; the kernels keep their own threads */
        pc_run(pc_env, pc_row, pc_local, pc_int, pc_fn, pc_total, pc_rows, 0, pc_blocks);
        return;
    }}
    #pragma omp parallel num_threads(pc_threads)
    {{
        int64_t pc_t = 0, pc_nt = 1;
#ifdef _OPENMP
        pc_t = omp_get_thread_num();
        pc_nt = omp_get_num_threads();
        omp_set_num_threads(1);   /* this thread's kernels: serial teams */
#endif
        const int64_t pc_per = (pc_blocks + pc_nt - 1) / pc_nt;
        const int64_t pc_first = pc_t * pc_per;
        const int64_t pc_last = pc_first + pc_per < pc_blocks ? pc_first + pc_per : pc_blocks;
        pc_run(pc_env, pc_row, pc_local + pc_t * pc_nlocal, pc_int, pc_fn, pc_total, pc_rows,
               pc_first, pc_last);
    }}
}}
"""


def _load(source: str) -> Any:
    lib = load_library(compile_c(source))
    fn = lib[SYMBOL]
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    fn.restype = None
    return fn


class RowDriver:
    """A recorded row loop (see the module doc), run by `run` for arrays like the recorded ones."""

    def __init__(self, loop: RowLoop, full: Sequence[Call], tail: Sequence[Call], env_names: Sequence[str],
                 row_bytes: Sequence[int], buffers: Sequence[str], temp_bytes: Sequence[int],
                 ints: Sequence[int], functions: Sequence[int]):
        self.loop = loop
        self.source = driver_source(full, tail)
        self._function = _load(self.source)
        self.env_names = tuple(env_names)
        #: the locals: first the intermediates (`buffers`, thread 0's from the program's plan), then temps
        self.buffers = tuple(buffers)
        self.temp_bytes = tuple(temp_bytes)
        self._row = (ctypes.c_int64 * max(1, len(row_bytes)))(*row_bytes)
        self._int = (ctypes.c_int64 * max(1, len(ints)))(*ints)
        self._fn = (ctypes.c_void_p * max(1, len(functions)))(*functions)
        self._mine = threading.local()   # per calling thread: the other threads' buffers, every temp

    @property
    def nlocal(self) -> int:
        return len(self.buffers) + len(self.temp_bytes)

    def _owned(self, planned: Mapping[str, np.ndarray]) -> List[List[np.ndarray]]:
        """This calling thread's arrays: per OpenMP thread, its intermediates (none for thread 0,
        whose are the plan's) and its temps; made on first use and kept."""
        owned = getattr(self._mine, "arrays", None)
        if owned is None:
            owned = self._mine.arrays = [
                ([] if t == 0 else [aligned_bytes(planned[b].nbytes) for b in self.buffers])
                + [aligned_bytes(n) for n in self.temp_bytes]
                for t in range(self.loop.threads)]
        return owned

    def run(self, env: Mapping[str, np.ndarray], total: int, planned: Mapping[str, np.ndarray]) -> None:
        """Every block of the loop on the arrays of `env` (the outputs already there, whole);
        `planned`: thread 0's intermediates (the program's planned buffers at a full block)."""
        owned = self._owned(planned)
        copies = self._sum_copies(env, owned)
        local: List[int] = []
        for t in range(self.loop.threads):
            mine = [data_pointer(planned[b]) for b in self.buffers] if t == 0 else []
            local += mine + [data_pointer(a) for a in owned[t]]
        env_ptr = (ctypes.c_void_p * max(1, len(self.env_names)))(*(data_pointer(env[n]) for n in self.env_names))
        local_ptr = (ctypes.c_void_p * max(1, len(local)))(*local)
        self._function(env_ptr, self._row, local_ptr, self.nlocal, self._int, self._fn,
                       total, self.loop.rows, self.loop.threads)
        for copy, name, op in copies:           # each thread's part of a sum, in thread order
            UPDATE_UFUNCS[op](env[name], copy, out=env[name])

    def _sum_copies(self, env: Mapping[str, np.ndarray], owned: List[List[np.ndarray]]) -> List[tuple]:
        """Each further thread's copy of every split sum (`RowLoop.combine`; thread 0 adds into the
        output itself), set to the operator's identity: (copy, output, operator)."""
        out = []
        for name, op in self.loop.combine:
            k = self.buffers.index(name)
            target = env[name]
            for t in range(1, self.loop.threads):
                copy = owned[t][k][:target.nbytes].view(target.dtype).reshape(target.shape)
                copy.fill(_identity(op, target.dtype))
                out.append((copy, name, op))
        return out


def _identity(op: str, dtype: np.dtype):
    """The value `op` leaves unchanged, in `dtype` (a copy's start: the output holds the start value)."""
    value = REDUCTION_IDENTITY[op]
    if dtype.kind != "f" and math.isinf(value):
        info = np.iinfo(dtype)
        return info.min if value < 0 else info.max
    return value


class _Recorder:
    """Builds a `RowDriver`'s tables from the bound calls of one block (see `record`)."""

    def __init__(self, env: Mapping[str, np.ndarray]):
        self.env = env
        self.env_index: Dict[str, int] = {}
        self.row_bytes: List[int] = []
        self.buffers: List[str] = []
        self.temp_bytes: List[int] = []
        self.ints: List[int] = []
        self.functions: List[int] = []

    def array(self, name: str) -> int:
        if name not in self.env_index:
            self.env_index[name] = len(self.env_index)
            a = self.env[name]
            self.row_bytes.append(int(a.strides[0]) if a.ndim else 0)
        return self.env_index[name]

    def function(self, address: int) -> int:
        if address not in self.functions:
            self.functions.append(address)
        return self.functions.index(address)


class _NotReplayable(Exception):
    """A group's call has an argument the driver cannot give from C (see `record`)."""


def record(loop: RowLoop, units: Sequence[Group], env: Mapping[str, np.ndarray], sizes: Mapping[str, int], *,
           outputs: Set[str], buffer: Callable[..., Any], compiled: Callable[[Group], Any]) -> Optional[RowDriver]:
    """The driver for `units` (compiled C groups: `loop.in_c`) on arrays like `env`'s, which holds
    the program's `outputs` whole already; None where a call passes a scalar or leaves an output to
    the kernel to allocate (neither happens in programs, whose groups take their scalars folded and
    every result as an argument)."""
    b = loop.blocks
    total = b.extent.evaluate(sizes)
    rec = _Recorder(env)
    sliced = dict(b.sliced)
    made = {t for u in units for t in u.outputs} | {t for t, _ in loop.combine}

    def arg(name: str, ctype: str) -> Arg:
        """Where tensor `name` of a block comes from (see `block_arrays`)."""
        if name in sliced:
            return Arg("rows", rec.array(sliced[name]), ctype)
        if name in outputs:
            return Arg("rows", rec.array(name), ctype)
        if name in made:        # an intermediate, or a sum split by thread: the running thread's own
            if name not in rec.buffers:
                rec.buffers.append(name)
            return Arg("local", rec.buffers.index(name), ctype)
        return Arg("env", rec.array(name), ctype)

    def sequence(n: int) -> Tuple[Call, ...]:
        local, out = block_arrays(loop, env, sizes, 0, n, outputs=outputs, buffer=buffer)
        calls = []
        for u in units:
            kwargs = {t: local[t] for t in u.inputs}
            for t in u.outputs:
                local[t] = kwargs[t] = out(t)
            kernel = compiled(u)
            typing = kernel.typing_for(kwargs)
            program = kernel.kernel.program
            bound = bind_arguments(program, kwargs, dtypes=typing.tensors, fully_written=kernel.kernel.model.fully_written)
            gen, fn = kernel.variant(typing, kernel.size_class(bound.sizes), bound.sizes)
            args = []
            for p, value in zip(gen.signature.params, bound.c_args(gen.signature, {})):
                ctype = p.c_type()
                if p.kind == "array" and p.name in kwargs:
                    args.append(arg(p.name, ctype))
                elif p.kind == "array":
                    if program.tensor(p.name).role != "temp":
                        raise _NotReplayable(p.name)
                    rec.temp_bytes.append(int(value.nbytes))
                    args.append(Arg("temp", len(rec.temp_bytes) - 1, ctype))
                elif p.kind == "size":
                    rec.ints.append(int(value))
                    args.append(Arg("int", len(rec.ints) - 1, ctype))
                else:
                    raise _NotReplayable(p.name)
            calls.append(Call(rec.function(ctypes.cast(fn.raw, ctypes.c_void_p).value), tuple(args)))
        return tuple(calls)

    try:
        full = sequence(loop.rows)
        tail = sequence(total % loop.rows) if total % loop.rows else full
    except _NotReplayable:
        return None
    # temps follow the intermediates among a thread's locals
    shift = len(rec.buffers)

    def placed(calls: Sequence[Call]) -> Tuple[Call, ...]:
        return tuple(Call(c.function, tuple(Arg("local", a.index + shift, a.ctype) if a.kind == "temp" else a
                                            for a in c.args)) for c in calls)
    names = sorted(rec.env_index, key=rec.env_index.get)
    return RowDriver(loop, placed(full), placed(tail), names, rec.row_bytes, rec.buffers, rec.temp_bytes,
                     rec.ints, rec.functions)
