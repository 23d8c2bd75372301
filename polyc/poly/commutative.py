"""Updates whose order does not change the result, bit for bit: integer max and min.

`table[i, j] = max(table[i, j], f)` (or an Einstein `max=!` / `min=!` update) on an integer
tensor computes the same value whatever order the updates of one element run in: integer max and
min are associative and commutative, with no rounding and no NaN, provided the element type holds
every value of the operand (an int32 operand of a uint8 maximum wraps on the store).  Float max
and min are left out (which of two NaNs, or of -0.0 and +0.0, survives depends on the order), and
so are integer sums and products (C's signed overflow), and updates whose operand reads the element
they update.  Such updates are *commutative updates*, grouped by operator.

The dependences between them (`Dependence.reorderable`) only say that two updates of one element
must not run at the same time: a schedule may swap them.  Everything else stays ordered exactly:

- every other read of the tensor (a read in `f`, or by any other statement) is ordered against
  every write of its element, before and after it (memory-based flow and anti dependences, where
  the usual analysis keeps only the last writer: with the updates reordered, any of them may be
  the last);
- an update is ordered against every write of its element by another operator or a plain
  assignment, both ways.

So between two such other accesses of an element, its updates form a set whose order is free; each
update's `f` reads what it read before; the element ends with the same value.  PolyBench's
nussinov (`table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])`) is the kernel this is
for: the order of the `k` updates of one cell is free, so the row `j` can become the inner loop.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import islpy as isl
import numpy as np

from ..ir import (Access, Binary, Call, Cast, Const, DType, Expr, IndexExpr, Program, ScalarRef, Select, Statement,
                  Unary, i32)
from ..ir.expr import COMPARISON_OPS, LOGICAL_OPS

#: The operators whose updates commute exactly on integers (Python's builtins `max`/`min` in loop
#: kernels are `pymax`/`pymin`, the same functions on integers).
EXACT_OPS = {"max": "max", "min": "min", "pymax": "max", "pymin": "min"}

#: Functions of integers whose result is an integer.
INTEGER_FUNCTIONS = ("max", "min", "pymax", "pymin", "abs")
COMPARE_AND_LOGIC = COMPARISON_OPS + LOGICAL_OPS


def commutative_op(program: Program, st: Statement) -> Optional[str]:
    """"max" or "min" when `st` is a commutative update (see the module docstring), else None."""
    dtype = getattr(program.tensor_map.get(st.target.tensor), "dtype", None)
    if dtype is None or dtype.is_float:
        return None
    if st.update is not None:
        op, rest = EXACT_OPS.get(st.update), st.value
    else:
        value = st.value
        if not (isinstance(value, Call) and value.fn in EXACT_OPS and len(value.args) == 2):
            return None
        own = [k for k, a in enumerate(value.args) if a == st.target]
        if len(own) != 1:
            return None
        op, rest = EXACT_OPS[value.fn], value.args[1 - own[0]]
    if any(a == st.target for a in rest.accesses()):
        return None   # `max(t, t + 1)`, `t max= 2 * t - b`: the operand reads the value being updated
    # The max is taken in the type of the wider operand and stored back into the element type: an
    # operand the element type cannot hold (a float, an int32 into uint8) would round or wrap on
    # the store, and which update wins would then depend on the order.
    return op if op is not None and _held_by(program, rest, dtype) else None


def _range(dtype: DType) -> Tuple[int, int]:
    info = np.iinfo(dtype.numpy)
    return int(info.min), int(info.max)


def _holds(target: DType, dtype: Optional[DType]) -> bool:
    """Whether integer type `target` holds every value of `dtype` (None: unknown, so no)."""
    if dtype is None or dtype.is_float:
        return False
    (lo, hi), (tlo, thi) = _range(dtype), _range(target)
    return tlo <= lo and hi <= thi


def _held_by(program: Program, e: Expr, target: DType) -> bool:
    """Whether `e` certainly has an integer type whose values `target` holds (conservative:
    unknown scalars, and functions other than max, min and abs, do not).  Arithmetic stays in the
    type of its widest operand, so looking at the leaves is enough."""
    if isinstance(e, Const):
        lo, hi = _range(target)
        return not isinstance(e.value, float) and lo <= int(e.value) <= hi and \
            (e.dtype is None or _holds(target, e.dtype))
    if isinstance(e, IndexExpr) or (isinstance(e, ScalarRef) and e.name in program.sizes):
        return _holds(target, i32)      # 64-bit in C, but sizes and indices stay below 2**31
    if isinstance(e, Access):
        return _holds(target, getattr(program.tensor_map.get(e.tensor), "dtype", None))
    if isinstance(e, ScalarRef):
        decl = next((x for x in program.scalars if x.name == e.name), None)
        return _holds(target, getattr(decl, "dtype", None))
    if isinstance(e, Cast):
        return _holds(target, e.dtype)
    if isinstance(e, Unary):
        return e.op == "not" or _held_by(program, e.operand, target)
    if isinstance(e, Binary):
        if e.op in ("/", "**"):
            return False
        return e.op in COMPARE_AND_LOGIC or (_held_by(program, e.lhs, target) and _held_by(program, e.rhs, target))
    if isinstance(e, Select):
        return _held_by(program, e.if_true, target) and _held_by(program, e.if_false, target)
    if isinstance(e, Call):
        return e.fn in INTEGER_FUNCTIONS and all(_held_by(program, a, target) for a in e.args)
    return False


def groups(program: Program, tensor: str) -> Dict[str, Tuple[str, ...]]:
    """Operator -> names of the commutative updates of `tensor` with it."""
    out: Dict[str, List[str]] = {}
    for st in program.statements:
        if st.target.tensor == tensor:
            op = commutative_op(program, st)
            if op is not None:
                out.setdefault(op, []).append(st.name)
    return {op: tuple(names) for op, names in out.items()}


def tensor_dependences(model, tensor: str, compute_flow) -> List[Tuple[str, isl.UnionMap, bool]]:
    """The dependences on `tensor`, which has commutative updates, as (kind, relation, reorderable)
    triples (see the module docstring).  `compute_flow` is `dependences.compute_flow`."""
    program = model.program
    by_op = groups(program, tensor)
    op_of = {name: op for op, names in by_op.items() for name in names}
    empty = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
    writes, others = empty, empty
    op_writes = {op: empty for op in by_op}
    non_op_writes = {op: empty for op in by_op}
    acc_reads = {op: empty for op in by_op}
    for info in model.accesses:
        if info.access.tensor != tensor:
            continue
        rel = isl.UnionMap.from_map(model.access_map(info.statement, info.access, info.guard))
        op = op_of.get(info.statement.name)
        if info.is_write:
            writes = writes.union(rel)
            for o in by_op:
                if o == op:
                    op_writes[o] = op_writes[o].union(rel)
                else:
                    non_op_writes[o] = non_op_writes[o].union(rel)
        elif op is not None and _is_accumulator_read(info):
            acc_reads[op] = acc_reads[op].union(rel)
        else:
            others = others.union(rel)
    schedule = model.schedule_map
    kept = {"flow": compute_flow(others, writes, schedule, False),
            "anti": compute_flow(writes, others, schedule, False),
            "output": compute_flow(writes, writes, schedule, False)}
    free = {"flow": empty, "anti": empty, "output": empty}
    for op in by_op:
        kept["flow"] = kept["flow"].union(compute_flow(acc_reads[op], non_op_writes[op], schedule, False))
        kept["anti"] = kept["anti"].union(compute_flow(non_op_writes[op], acc_reads[op], schedule, False))
        free["flow"] = free["flow"].union(compute_flow(acc_reads[op], op_writes[op], schedule, False))
        free["anti"] = free["anti"].union(compute_flow(op_writes[op], acc_reads[op], schedule, False))
        free["output"] = free["output"].union(compute_flow(op_writes[op], op_writes[op], schedule, False))
    # Writes of two operators (or a plain write) on one element stay ordered; one operator's own
    # updates do not.
    kept["output"] = kept["output"].subtract(free["output"])
    out = []
    for kind in ("flow", "anti", "output"):
        out.append((kind, kept[kind], False))
        out.append((kind, free[kind].subtract(kept[kind]), True))
    return out


def _is_accumulator_read(info) -> bool:
    """Whether read `info` of a commutative update is its accumulator: the update's own read of
    its target (`AccessInfo` lists it right after the write for `st.update`), or the top-level
    argument of `max(target, f)` (which `commutative_op` made sure is the only such access)."""
    return info.guard is None and info.access == info.statement.target
