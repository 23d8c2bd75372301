"""A packed contraction that starts from zero writes its target once, instead of three times.

`C[i, j] +=! A[i, k] * B[k, j]` is two statements: `C = 0`, then `C += A * B`.  Run as written,
the target goes through memory three times: zeroed, then loaded and stored by the packed code's
first k block.  For a product with a short k loop (an attention head's `Q Kᵀ`: 1024 x 1024 x 64)
that traffic costs as much as the arithmetic.  BLAS has `beta = 0` for this; here:

- the packed helper's micro-kernels start their accumulators at zero in the first k block instead
  of loading the target (`first`, passed as `pc_pc == 0`): exact, since `0 + x == x` bit for bit,
  and the target holds zeros there by the time the first block runs;
- the zeroing statement is then not emitted at all, when every execution of the contraction goes
  through the helper; the helper zeroes the target box itself where it does not run the blocks
  (no k iterations at these sizes; buffers it cannot allocate, before falling back to plain loops).

`zero_init` says when the target holds zeros before the contraction's first update of each element,
with nothing else seeing those zeros: the only other statement writing the target assigns it a
zero constant, over exactly the target elements of the contraction's (m, n) box (isl, at every
size), and its values flow to the contraction alone (exact dataflow).  Contractions with batch
loops or masked boxes are left as they are.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import cgen
import islpy as isl

from ..ir import Const, Program
from ..poly.islutil import affine_str, isl_budget, isl_name
from ..poly.model import access_str, tuple_str
from ..schedule.packing import PackPlan
from ..schedule.schedule import Schedule
from .c_packed_parts import P, Groups, decode, run_loop


def zero_init(schedule: Schedule, plan: PackPlan) -> Optional[str]:
    """The statement zeroing the target of `plan`'s contraction that the packed code can fold
    (module docstring), or None."""
    c = plan.contraction
    program: Program = schedule.model.program
    st = program.statement(c.statement)
    if plan.mask or c.batch:
        return None
    writers = [s for s in program.statements if s.target.tensor == st.target.tensor and s.name != st.name]
    if len(writers) != 1:
        return None
    init = writers[0]
    if init.update is not None or not isinstance(init.value, Const) or init.value.value != 0:
        return None
    source = isl_name(init.name)
    for d in schedule.model.dependences:
        if d.kind == "flow" and d.source == source and d.sink != isl_name(st.name):
            return None
    model = schedule.model
    box = " and ".join(f"{affine_str(lo)} <= {isl_name(x)} <= {affine_str(hi)}"
                       for x, lo, hi in plan.bounds if x in c.m + c.n)
    with isl_budget(f"checking what zeroes the target of packed statement {st.name}"):
        region = isl.Set(f"{model.pstr} -> {{ {tuple_str('B', c.m + c.n)} : {box} }}")
        writes = isl.Map(f"{model.pstr} -> {{ {tuple_str('B', c.m + c.n)} -> {access_str(st.target)} }}")
        zeroed = model.guarded_domain(init).apply(model.access_map(init, init.target))
        covered = region.apply(writes)
        context = model.context
        if not zeroed.intersect_params(context).is_equal(covered.intersect_params(context)):
            return None
    return init.name


def zero_inits(schedule: Schedule, plans: Dict[str, PackPlan], packable) -> Dict[str, str]:
    """Packed statement -> the zeroing statement it folds, for the plans `packable(plan)` accepts."""
    out = {}
    for name, plan in plans.items():
        if packable(plan):
            init = zero_init(schedule, plan)
            if init is not None:
                out[name] = init
    return out


def zero_box(g: Groups, target: str, indent: str) -> List[str]:
    """Lines writing zero to every target element of the (m, n) box (the extents `pc_e_*` known)."""
    extents = [f"{P}e_{x}" for x in g.m + g.n]
    return [f"{indent}if ({' && '.join(f'{e} > 0' for e in extents)}) {{",
            f"{indent}  const int64_t {P}zm = {' * '.join(f'{P}e_{x}' for x in g.m)}, "
            f"{P}zn = {' * '.join(f'{P}e_{x}' for x in g.n)};",
            f"{indent}  for (int64_t {P}zi = 0; {P}zi < {P}zm; {P}zi++) {{",
            *decode(g.m, f"{P}zi", indent + "    "),
            *run_loop(g.n, "0", f"{P}zn", f"{P}zq", lambda q: f"{target} = 0;", indent + "    "),
            f"{indent}  }}",
            f"{indent}}}"]


class Deferred(cgen.Generable):
    """A zeroing nest whose packed contraction may fold it in: its lines are printed unless
    `dropped()` is true when the function is printed, after the whole function was emitted."""

    def __init__(self, items: List, dropped: Callable[[], bool]):
        self.items = items
        self.dropped = dropped

    def generate(self):
        if self.dropped():
            yield "/* zeroing folded into the packed contraction below (c_packed_init) */"
            return
        for item in self.items:
            yield from item.generate()
