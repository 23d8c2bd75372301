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

from typing import Dict, List, Optional, Sequence

import cgen as c

from ..ir import Program
from .cexpr import CExprPrinter
from ..schedule.packing_paths import consecutive_along
from .loop_ast import Call, Loop, flat_block, ids, operand, strip_parens

#: Whether vector loops are peeled at all (a switch for measuring the peel against none).
ENABLED = True

#: The C helper: iterations until `pc_p` (an element of `pc_elem` bytes) reaches a cache line.
PEEL_HELPER = ("static inline int64_t pc_align_peel(const void *pc_p, int64_t pc_elem) "
               "{ return (int64_t)((0 - (uintptr_t)pc_p) & 63) / pc_elem; }")

#: The loop's first iteration, and where its vector part starts (C names, scoped to the loop).
LOW, SPLIT = "pc_peel_lo", "pc_peel_at"


def anchor(loop: Loop, calls: Sequence[Call], statements: Dict, program: Program) -> Optional[tuple]:
    """The anchor access of the innermost vector loop `loop` whose body is `calls` (see the module
    doc): (statement iterator that is the loop's, the call, its statement, the access), or None
    where no array qualifies."""
    best = None
    for call in calls:
        st = statements[call.statement]
        moving = [i for i, a in zip(st.iterators, call.args) if loop.iterator in ids(a)]
        if len(moving) != 1:
            continue
        v = moving[0]
        arg = dict(zip(st.iterators, call.args))[v]
        if not (arg.op == "id" and arg.value == loop.iterator):
            continue
        if consecutive_along(st.target, v):
            return None     # a row written as well as read: see the module doc
        for acc in st.value.accesses():
            decl = program.tensor(acc.tensor)
            if decl.role == "temp" or not consecutive_along(acc, v):
                continue
            key = len(acc.indices)
            if best is None or key > best[0]:
                best = (key, call, st, v, acc)
    if best is None:
        return None
    _, call, st, v, acc = best
    return v, call, st, acc


def peeled_loop(emitter, n: Loop, body, pragmas: List) -> Optional[List]:
    """Vector loop `n` (C body `body`, under `pragmas`) split at the first cache line of its anchor
    array, as cgen statements of `emitter` (a `c._Emitter`); None where it is not peeled: the switch
    is off, the loop strides, its bounds depend on an enclosing loop (a tile's rows), or no array
    qualifies (`anchor`)."""
    if not ENABLED or n.step != 1:
        return None
    if {emitter.names.id(x) for x in ids(n.init) | ids(n.cond)} & set(emitter._scope):
        return None
    calls = flat_block(n.body)
    if not calls or not all(isinstance(x, Call) for x in calls):
        return None
    found = anchor(n, calls, emitter.statements, emitter.program)
    if found is None:
        return None
    v, call, st, acc = found
    index_text = {i: strip_parens(emitter._c(a)) for i, a in zip(st.iterators, call.args)}
    index_text[v] = LOW
    address = CExprPrinter(emitter.typing, index_text, emitter._access, emitter.names).access(acc)
    ctype = emitter.typing.tensors[acc.tensor].c_name
    it, cond = emitter.names.id(n.iterator), strip_parens(emitter._c(n.cond))
    return [c.Block([
        c.Line(f"const int64_t {LOW} = {strip_parens(emitter._c(n.init))};"),
        c.Line(f"const int64_t {SPLIT} = {LOW} + pc_align_peel(&{address}, sizeof({ctype}));"),
        c.For(f"int64_t {it} = {LOW}", f"{it} < {SPLIT} && {operand(cond)}", f"{it}++", body),
        *pragmas,
        c.For(f"int64_t {it} = {SPLIT}", cond, f"{it}++", body)])]
