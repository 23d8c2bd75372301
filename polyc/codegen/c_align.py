"""Alignment peeling: a vector loop over whole rows starts its vector part on a cache line.

numpy aligns large arrays to 16 bytes (a multiple of 16 past a page), so a 64-byte vector load of
such a row straddles two cache lines every time.  A vector loop that walks a whole row of an array
(its bounds depend on no enclosing loop) therefore runs its first iterations, up to the first
element of that array on a cache-line boundary, as a loop of their own and the rest from there:
the iterations and their order are the same, only where the compiler's vector part begins moves.
Measured on the AVX-512 machine: matvec 2048^2 from a numpy array 201 -> 178 us (172 us when the
array was aligned to begin with, 178 with the peel).  Loops inside tiles (bounds that depend on
the tile loops, e.g. a time-tiled stencil's rows of 128) are left alone: their rows are short
and cache-resident, and a peel of up to seven scalar iterations per row cost a stencil of
130-element rows 8%.

The array the peel aligns (`anchor`): one the loop reads with unit stride along its last
dimension, a kernel parameter (not a row buffer or temp), the one with the most dimensions (a
matrix read against a vector).  Loops that also write a row are left alone: the row written and
the rows read need not share an alignment (polyc's outputs are 64-byte aligned, numpy's inputs
are not), and a peel cannot serve both (layernorm 2048x1024: 344 -> 365 us with the written row
aligned).  So the peel serves reading loops: reductions along a row (matvec: 266 -> 220 us from
an array 16 bytes off a cache line, 208 -> 216 us from an aligned one).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

from ..ir import Affine, Program
from .loop_ast import Call, Loop

#: Whether vector loops are peeled at all (a switch for measuring the peel against none).
ENABLED = True

#: The C helper: iterations until `pc_p` (an element of `pc_elem` bytes) reaches a cache line.
PEEL_HELPER = ("static inline int64_t pc_align_peel(const void *pc_p, int64_t pc_elem) "
               "{ return (int64_t)((0 - (uintptr_t)pc_p) & 63) / pc_elem; }")

#: The loop's first iteration, and where its vector part starts (C names, scoped to the loop).
LOW, SPLIT = "pc_peel_lo", "pc_peel_at"


def _ids(e) -> set:
    return {e.value} if e.op == "id" else set().union(*(_ids(a) for a in e.args)) if e.args else set()


def _unit_stride(acc, v: str) -> bool:
    """Whether `acc` walks its last dimension with unit stride along iterator `v` (and no other)."""
    idx = acc.indices
    return bool(idx) and all(isinstance(e, Affine) for e in idx) and idx[-1].coeff(v) == 1 \
        and not any(e.coeff(v) for e in idx[:-1])


def ids(e) -> set:
    """The ids (iterators, sizes) a loop-AST expression mentions."""
    return _ids(e)


def anchor(loop: Loop, calls: Sequence[Call], statements: Dict, program: Program) -> Optional[tuple]:
    """The anchor access of the innermost vector loop `loop` whose body is `calls` (see the module
    doc): (statement iterator that is the loop's, the call, its statement, the access), or None
    where no array qualifies."""
    best = None
    for call in calls:
        st = statements[call.statement]
        moving = [i for i, a in zip(st.iterators, call.args) if loop.iterator in _ids(a)]
        if len(moving) != 1:
            continue
        v = moving[0]
        arg = dict(zip(st.iterators, call.args))[v]
        if not (arg.op == "id" and arg.value == loop.iterator):
            continue
        if _unit_stride(st.target, v):
            return None     # a row written as well as read: see the module doc
        for acc in st.value.accesses():
            decl = program.tensor(acc.tensor)
            if decl.role == "temp" or not _unit_stride(acc, v):
                continue
            key = len(acc.indices)
            if best is None or key > best[0]:
                best = (key, call, st, v, acc)
    if best is None:
        return None
    _, call, st, v, acc = best
    return v, call, st, acc
