"""Row blocks: operators that work row by row run block of rows by block, their intermediates
sized for one block.

Fusing a matrix product row by row with its neighbours costs it its packed kernel (`fusion`), so
an attention head kept `S x S` scores and probabilities whole between its operators.  Blocks of
rows keep both: each operator still runs its own compiled kernel (packed products included), but
on rows `r0:r1` of the tensors that flow row by row, so the intermediates between them hold one
block (`B x S` instead of `S x S`), reused for every block.

When it is exact.  An operator's kernel is *row-wise* in its size `I` (`row_form`) when
- every tensor it writes has `I` as the extent of its first dimension (the rows), and no other
  dimension of any tensor mentions `I`;
- every statement writes row `i` of its target for a loop `i` of its own, reads every row
  tensor (first extent `I`) at row `i`, and mentions `i` nowhere else: not in another subscript,
  not in a value, and in its domain only as `0 <= i <= I - 1`;
- `I` itself appears nowhere else (not as a value, as `mean = sum / N` would use it).
Then each instance of a statement with `i = r` reads and writes row `r` of the row tensors only,
any element of the others, and the instances with `i` in `r0:r1` are exactly the instances of
the same kernel run on rows `r0:r1` (sizes `I = r1 - r0`): running it block by block computes
what one run computes, and a block's rows are computed from that block's rows alone.

Which operators run in blocks (`row_blocks`), from the program's outputs backwards: an operator
whose results are only ever read row by row, by operators in blocks or as program outputs, runs
in blocks if its kernel is row-wise with the same row extent as the outputs; its row inputs are
then read row by row, its other inputs whole.  An operator one of whose results is read whole
runs once, whole, before the blocks (with everything it reads); that includes re-layouts of a
product's right operand.  Nothing is recomputed: every operator runs exactly once per row.
Blocks pay only when some intermediate is produced and consumed inside them.

Accumulations across blocks.  A gradient sums over the rows: `dV[j, d] += P[i, j] * dO[i, d]`
reads `P` and `dO` by rows but writes no row, so it is not row-wise, and it used to keep the whole
`S x S` matrix `P` alive (the attention head's backward held 12 MiB of intermediates, more than
unfused).  Such an operator is *row-accumulating* in its size `I` (`row_accumulation`) when its
statements are
- starts: `T[..] = constant`, mentioning neither `I` nor a row tensor, all before
- updates: `T[..] op= value` (`+ * max min`), one per output, whose domain bounds one iterator `i` by
  `0 <= i <= I - 1` only, `i` the first of the statement's reduction iterators, row tensors read
  at row `i` and `i`, `I` mentioned nowhere else; no value reads a tensor the operator writes,
and what it writes is a program output nobody reads, written whole, with no `I` in its shape.
Then running the starts once, before the blocks, and the updates on each block in order (an
operator of its own, `T` updated in place: kernel role "inout") performs every update instance
once, and each element's updates in the order of `i`, the source's: the result is the whole
operator's.  Two threads adding into the same `dV` would race: where every such sum is an
Einstein reduction (unordered, as Tensor Comprehensions defines them) each thread adds its run of
blocks into a copy of its own, combined into the output after the loop in thread order
(`RowBlocks.combine`, `row_driver`); otherwise the blocks run one after another on the caller's
thread, each kernel with its own OpenMP threads.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

from ..ir import Affine, Constraint, IndexExpr, ScalarRef, Statement
from ..schedule.rewrite import fresh_name
from .trace import Node, TensorHandle


@dataclass(frozen=True)
class RowForm:
    """How a kernel is row-wise: `size` counts its rows; `tensors` have them as first dimension."""

    size: str
    tensors: FrozenSet[str]


def _bound_only(conj: Sequence[Constraint], it: str, size: str) -> bool:
    """`conj` mentions `it` and `size` only in `it >= 0` and `size - it - 1 >= 0` (both present)."""
    lower, upper = Affine.var(it), Affine.var(size) - Affine.var(it) - 1
    seen = set()
    for c in conj:
        if it not in c.expr.variables and size not in c.expr.variables:
            continue
        if c.kind != "ge" or c.expr not in (lower, upper):
            return False
        seen.add(c.expr)
    return len(seen) == 2


def _row_tensors(program, size: str) -> Optional[Set[str]]:
    """The tensors whose first extent is exactly `size` (the rows), or None when `size` appears in
    any other extent."""
    row = Affine.var(size)
    rows = {t.name for t in program.tensors if t.shape and t.shape[0] == row}
    for t in program.tensors:
        dims = tuple(t.shape or ())
        if any(size in d.variables for d in dims[1:]) or (dims and t.name not in rows and size in dims[0].variables):
            return None
    return rows


def _row_local(st: Statement, it: str, size: str, rows: Set[str]) -> bool:
    """`st` reads and writes the `rows` tensors at row `it` only, and mentions `it` and `size`
    nowhere else in its subscripts and value."""
    for acc in (st.target,) + st.value.accesses():
        first, rest = (acc.indices[0], acc.indices[1:]) if acc.tensor in rows else (None, acc.indices)
        if first is not None and first != Affine.var(it):
            return False
        if any(it in i.variables or size in i.variables for i in rest):
            return False
    for e in st.value.walk():
        if isinstance(e, IndexExpr) and ({it, size} & set(e.value.variables)):
            return False
        if isinstance(e, ScalarRef) and e.name in (it, size):
            return False
    return True


def row_form(program) -> Optional[RowForm]:
    """The kernel's row form (see the module docstring), or None when it is not row-wise."""
    written = {st.target.tensor for st in program.statements}
    decls = program.tensor_map
    if not written or any(decls[t].role == "inout" or not decls[t].shape for t in written):
        return None
    size = decls[next(iter(sorted(written)))].shape[0].as_single_var()
    if size is None:
        return None
    rows = _row_tensors(program, size)
    if rows is None or not written <= rows:
        return None
    for st in program.statements:
        it = st.target.indices[0].as_single_var() if st.target.indices else None
        if it is None or it not in st.iterators or it in st.divisions or not _row_local(st, it, size, rows):
            return None
        if not all(_bound_only(conj, it, size) for conj in st.domain):
            return None
    return RowForm(size, frozenset(rows))


def _row_iterator(st: Statement, size: str) -> Optional[str]:
    """The one iterator of `st` whose domain bounds it by `size` only (`0 <= it <= size - 1`)."""
    found = [it for it in st.iterators if all(_bound_only(conj, it, size) for conj in st.domain)]
    return found[0] if len(found) == 1 else None


def row_accumulation(kernel, size: str) -> Optional[Tuple[RowForm, Tuple[Statement, ...], Tuple[Statement, ...]]]:
    """(form, starts, updates) when `kernel` is row-accumulating in its size `size` (see the
    module docstring), else None; `form.tensors`: the tensors it reads by rows."""
    program = kernel.program
    if program.derived_sizes or program.int_params or size in program.int_params:
        return None
    written = {st.target.tensor for st in program.statements}
    decls = program.tensor_map
    if not written or any(decls[t].role != "output" for t in written) or not written <= kernel.model.fully_written:
        return None
    if any(t.role == "temp" for t in program.tensors):
        return None
    rows = _row_tensors(program, size)
    if rows is None or rows & written:
        return None
    starts: List[Statement] = []
    updates: List[Statement] = []
    for st in program.statements:
        if st.update is None:
            if updates or st.value.accesses() or any(size in i.variables for i in st.target.indices) or \
                    any(size in c.expr.variables for conj in st.domain for c in conj):
                return None
            starts.append(st)
            continue
        it = _row_iterator(st, size)
        if st.update not in ("+", "*", "max", "min") or it is None or not st.reduction or \
                st.reduction[0] != it or it in st.divisions:
            return None
        if any(a.tensor in written for a in st.value.accesses()) or not _row_local(st, it, size, rows):
            return None
        updates.append(st)
    if not updates or len({st.target.tensor for st in updates}) != len(updates):
        return None     # two updates of one output would alternate block by block, not run one by one
    return RowForm(size, frozenset(rows)), tuple(starts), tuple(updates)


def split_accumulation(n: Node, starts: Sequence[Statement], updates: Sequence[Statement],
                       indices: Tuple[int, int], names: Set[str]) -> Tuple[Node, Node]:
    """Node `n` (row-accumulating) as two operators: its starts alone, run once (their outputs
    are `n`'s), and its updates alone, run per block on the outputs in place (role "inout")."""
    from ..api import Kernel
    program = n.kernel.program
    written = {st.target.tensor for st in program.statements}
    kept = [t for t in program.tensors if t.name in written]
    sizes = {v for t in kept for d in t.shape or () for v in d.variables}
    named = {e.name for st in starts for e in st.value.walk() if isinstance(e, ScalarRef)}
    start_program = program.with_(
        name=f"{program.name}_start", statements=tuple(starts), tensors=tuple(kept),
        scalars=tuple(x for x in program.scalars if x.name in named),
        sizes=tuple(x for x in program.sizes if x in sizes),
        assumptions=tuple(c for c in program.assumptions if set(c.expr.variables) <= sizes), defaults=())
    update_program = program.with_(
        name=f"{program.name}_update", statements=tuple(updates),
        tensors=tuple(replace(t, role="inout") if t.name in written else t for t in program.tensors))
    start = replace(n, index=indices[0], kernel=Kernel(start_program),
                    scalars=tuple((x, v) for x, v in n.scalars if x in named),
                    bindings=tuple((k, p) for k, p in n.bindings if k in written),
                    sizes=tuple((x, a) for x, a in n.sizes if x in sizes),
                    name=fresh_name(f"{n.name}_start", names))
    update = replace(n, index=indices[1], kernel=Kernel(update_program))
    return start, update


@dataclass(frozen=True)
class RowBlocks:
    """How a program runs in row blocks.

    - `extent`: the rows (program affine size, e.g. `S`); `size`: the program size naming one
      block's rows in the blocked operators;
    - `before`: nodes run once, whole, before the blocks; `blocked`: nodes run per block, their
      row sizes rewritten to `size` and their row reads of whole tensors bound to `<name>_rows`;
    - `sliced`: `<name>_rows` -> `name` for tensors computed whole (inputs, results of `before`)
      and read row by row: rows `r0:r1` of `name`;
    - `handles`: every tensor of the blocked nodes, shaped per block where it flows by rows;
    - `accumulated`: program outputs the blocks add into, in block order (see the module
      docstring);
    - `combine`: (output, operator) for each of them when all are Einstein reductions, which
      are unordered (Tensor Comprehensions' meaning): threads may then each add their run of
      blocks into a copy of their own, combined at the end; otherwise the blocks run one after
      another.
    """

    extent: Affine
    size: str
    before: Tuple[Node, ...]
    blocked: Tuple[Node, ...]
    sliced: Tuple[Tuple[str, str], ...]
    handles: Mapping[str, TensorHandle]
    accumulated: Tuple[str, ...] = ()
    combine: Tuple[Tuple[str, str], ...] = ()

    @property
    def intermediates(self) -> Tuple[str, ...]:
        """Tensors produced and consumed inside the blocks (those that shrink to one block)."""
        read = {p for n in self.blocked for p in n.inputs}
        return tuple(p for n in self.blocked for p in n.outputs if p in read)


def row_blocks(nodes: Sequence[Node], handles: Mapping[str, TensorHandle], outputs: Sequence[str],
               sizes: Sequence[str]) -> Optional[RowBlocks]:
    """The row blocks of a program (see the module docstring), or None when none pay.  The rows
    are the first extent of an output, else of an input (a program returning only column sums
    still works row by row), the first that gives blocks."""
    if not outputs:
        return None
    tried = []
    for h in [handles[p] for p in outputs] + [h for h in handles.values() if h.producer is None]:
        extent = h.shape[0] if h.shape else None
        if extent is None or extent in tried:
            continue
        tried.append(extent)
        found = _row_blocks_over(extent, nodes, handles, outputs, sizes)
        if found is not None:
            return found
    return None


def _row_blocks_over(extent: Affine, nodes: Sequence[Node], handles: Mapping[str, TensorHandle],
                     outputs: Sequence[str], sizes: Sequence[str]) -> Optional[RowBlocks]:
    """`row_blocks` with rows `extent`."""
    forms: Dict[int, Optional[RowForm]] = {n.index: row_form(n.kernel.program) for n in nodes}
    whole: Set[str] = set()          # tensors some operator (or nothing but a whole run) needs whole
    read = {p for n in nodes for p in n.inputs}
    names = {n.name for n in nodes}
    fresh = max((n.index for n in nodes), default=0) + 1
    accumulated: List[str] = []
    operators: Dict[str, Set[str]] = {}     # accumulated output -> its update operators ("in order": a loop kernel's)
    blocked: List[Node] = []
    before: List[Node] = []
    read_by_rows: Set[str] = set()
    for n in reversed(nodes):
        form = forms[n.index]
        kernel_of = {p: k for k, p in n.bindings}
        ok = (form is not None and not (set(n.outputs) & whole)
              and all(kernel_of[p] in form.tensors for p in n.outputs)
              and dict(n.sizes).get(form.size) == extent)
        if not ok and set(n.outputs) <= set(outputs) and not set(n.outputs) & read:
            found = next((f for f in (row_accumulation(n.kernel, x) for x, a in n.sizes if a == extent) if f), None)
            if found is not None:
                start, n = split_accumulation(n, found[1], found[2], (fresh, fresh + 1), names)
                fresh += 2
                before.append(start)
                form = forms[n.index] = found[0]
                ok = True
                accumulated += n.updates
                written = dict(n.bindings)
                for st in found[2]:
                    operators.setdefault(written[st.target.tensor], set()).add(
                        st.update if n.kernel.program.frontend == "einsum" else "in order")
        if not ok:
            before.append(n)
            whole.update(n.inputs)
            continue
        assert form is not None
        blocked.append(n)
        for k, p in n.bindings:
            if p in n.inputs and k in form.tensors:
                read_by_rows.add(p)
            elif p in n.inputs:
                whole.add(p)
    blocked.reverse()
    before.reverse()
    produced_in = {p for n in blocked for p in n.outputs}
    if not blocked or not any(p in produced_in for n in blocked for p in n.inputs):
        return None
    taken = set(sizes) | set(handles)
    single = extent.as_single_var()
    size = fresh_name(f"{single}_rows" if single else "rows", taken)
    # Row ranges of whole tensors: those the blocks read by rows and nothing in them produces.  An
    # output of an operator before the blocks (a 0-d loss beside an attention head) stays whole.
    rows_of_whole = {p: fresh_name(f"{p}_rows", taken) for p in sorted(read_by_rows - produced_in - set(accumulated))}
    out_handles: Dict[str, TensorHandle] = dict(handles)
    for p in produced_in:
        h = handles[p]
        out_handles[p] = replace(h, shape=(Affine.var(size),) + tuple(h.shape[1:]))
    for p, alias in rows_of_whole.items():
        h = handles[p]
        out_handles[alias] = replace(h, name=alias, shape=(Affine.var(size),) + tuple(h.shape[1:]), producer=None)
    rewritten = []
    for n in blocked:
        form = forms[n.index]
        assert form is not None
        bindings = tuple((k, rows_of_whole[p] if k in form.tensors and p in rows_of_whole else p)
                         for k, p in n.bindings)
        sizes_of = tuple((s, Affine.var(size) if s == form.size else a) for s, a in n.sizes)
        rewritten.append(replace(n, bindings=bindings, sizes=sizes_of))
    return RowBlocks(extent, size, tuple(before), tuple(rewritten),
                     tuple((alias, p) for p, alias in rows_of_whole.items()), out_handles, tuple(sorted(accumulated)),
                     _combinable(operators))


def _combinable(operators: Mapping[str, Set[str]]) -> Tuple[Tuple[str, str], ...]:
    """(output, operator) of the accumulations threads may split (`RowBlocks.combine`): all or none."""
    if any(len(ops) != 1 or "in order" in ops for ops in operators.values()):
        return ()
    return tuple(sorted((t, next(iter(ops))) for t, ops in operators.items()))


def block_rows(total: int, m_block: int, threads: int) -> int:
    """Rows per block: a packed product's m block (`m_block`, the rows whose packed panels it
    reuses: fewer rows copy the other operand's panels once more per block), at least 64.  With
    several threads each has a block live at once, so a block is `m_block / threads` rows: the
    intermediates of all threads together take what one thread's take (the attention head at
    1024 rows on two threads: blocks of 128 ran in 0.95 ms with 2.3 MiB of intermediates, blocks of
    256 in 0.94 ms with 4.3 MiB), and at most an equal share of the rows, so every thread has one."""
    rows = max(64, m_block // max(1, threads))
    if threads > 1:
        rows = min(rows, max(64, -(-total // threads)))
    return max(1, min(total, rows))
