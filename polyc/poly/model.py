"""`Program` -> isl: iteration domains, access relations and the source-order schedule."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Tuple

import islpy as isl

from ..ir import Access, Program, Statement
from ..ir.guards import DNF, guarded_accesses
from .islutil import affine_str, constraint_str, disjunction_str, isl_name, params_str, user_name

if TYPE_CHECKING:
    from .dependences import Dependences


def tuple_str(name: str, dims) -> str:
    return f"{isl_name(name)}[{', '.join(isl_name(d) for d in dims)}]"


def access_str(acc: Access) -> str:
    return f"{isl_name(acc.tensor)}[{', '.join(affine_str(e) for e in acc.indices)}]"


@dataclass(frozen=True)
class AccessInfo:
    """One access of one statement: kept to name it in error messages."""

    statement: Statement
    access: Access
    is_write: bool
    #: Affine condition (a `select` around it) under which the access happens; None: always.
    guard: Optional[DNF] = None


class PolyModel:
    """The polyhedral view of a (shape-inferred) program.  Immutable; isl objects are built lazily.

    - `params`: size symbols (isl parameters); `context`: what holds for every valid call
      (sizes >= 1 — the assumption under which bounds are proven);
    - `domain`: union of statement iteration domains;
    - `reads`/`writes`: access relations restricted to the domain;
    - `schedule_map`: the 2d+1 source-order schedule.
    """

    def __init__(self, program: Program):
        self.program = program
        self.params: Tuple[str, ...] = tuple(program.sizes)
        self.depth = max((len(s.iterators) for s in program.statements), default=0)
        self._outside: Dict[int, isl.Set] = {}

    @property
    def pstr(self) -> str:
        return params_str(self.params)

    def _params_set(self, least: int) -> isl.Set:
        """Extents >= `least`, integer parameters free, and the program's assumptions."""
        free = set(self.program.int_params)
        conds = [f"{isl_name(p)} >= {least}" for p in self.params if p not in free]
        conds += [constraint_str(c) for c in self.program.assumptions]
        return isl.Set(f"{self.pstr} -> {{ : {' and '.join(conds) or 'true'} }}")

    @cached_property
    def context(self) -> isl.Set:
        return self._params_set(1)

    @cached_property
    def codegen_context(self) -> isl.Set:
        """Sizes >= 0: generated code must be correct for empty tensors too."""
        return self._params_set(0)

    def statement_domain(self, st: Statement) -> isl.Set:
        return isl.Set(f"{self.pstr} -> {{ {tuple_str(st.name, st.iterators)} : {disjunction_str(st.domain)} }}")

    @cached_property
    def domains(self) -> Dict[str, isl.Set]:
        return {st.name: self.statement_domain(st) for st in self.program.statements}

    @cached_property
    def domain(self) -> isl.UnionSet:
        out = isl.UnionSet.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        for s in self.domains.values():
            out = out.union(isl.UnionSet.from_set(s))
        return out

    def guarded_domain(self, st: Statement, guard: Optional[DNF] = None) -> isl.Set:
        """The instances of `st` where `guard` holds (all of its domain for None)."""
        if guard is None:
            return self.domains[st.name]
        g = isl.Set(f"{self.pstr} -> {{ {tuple_str(st.name, st.iterators)} : {disjunction_str(guard)} }}")
        return self.domains[st.name].intersect(g)

    def outside_instances(self, k: int) -> isl.Set:
        """The instances of access `accesses[k]`'s statement (under its guard, for every size)
        where it leaves its tensor; built once per model, as the bounds proof and the requirements
        for empty arrays (`polyc.poly.checks`) both ask.  Call it under an `isl_budget`."""
        found = self._outside.get(k)
        if found is None:
            info = self.accesses[k]
            st, acc = info.statement, info.access
            shape = self.program.tensor(acc.tensor).shape or ()
            outside = " or ".join(f"{affine_str(e)} < 0 or {affine_str(e)} >= {affine_str(n)}"
                                  for e, n in zip(acc.indices, shape))
            bad = isl.Set(f"{self.pstr} -> {{ {tuple_str(st.name, st.iterators)} : {outside} }}")
            found = self._outside[k] = bad.intersect(self.guarded_domain(st, info.guard))
        return found

    def access_map(self, st: Statement, acc: Access, guard: Optional[DNF] = None) -> isl.Map:
        m = isl.Map(f"{self.pstr} -> {{ {tuple_str(st.name, st.iterators)} -> {access_str(acc)} }}")
        return m.intersect_domain(self.guarded_domain(st, guard))

    @cached_property
    def accesses(self) -> List[AccessInfo]:
        """Every access of every statement; reads under an affine `select` carry its guard."""
        out = []
        for st in self.program.statements:
            out.append(AccessInfo(st, st.target, True))
            if st.update:
                out.append(AccessInfo(st, st.target, False))
            for acc, guard in guarded_accesses(st.value):
                out.append(AccessInfo(st, acc, False, guard))
        return out

    def _union(self, maps) -> isl.UnionMap:
        out = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        for m in maps:
            out = out.union(isl.UnionMap.from_map(m))
        return out

    @cached_property
    def writes(self) -> isl.UnionMap:
        return self._union(self.access_map(a.statement, a.access, a.guard) for a in self.accesses if a.is_write)

    @cached_property
    def reads(self) -> isl.UnionMap:
        return self._union(self.access_map(a.statement, a.access, a.guard) for a in self.accesses
                           if not a.is_write)

    def statement_schedule(self, st: Statement) -> isl.Map:
        """`S[i, j] -> [c0, i, c1, j, c2, 0, ...]`, padded to the deepest statement."""
        out = []
        for k, c in enumerate(st.order):
            out.append(str(c))
            if k < len(st.iterators):
                it = st.iterators[k]
                # A loop written to count down runs its iterator in decreasing order.
                out.append(f"-{isl_name(it)}" if it in getattr(st, "descending", ()) else isl_name(it))
        out += ["0"] * (2 * self.depth + 1 - len(out))
        return isl.Map(f"{self.pstr} -> {{ {tuple_str(st.name, st.iterators)} -> [{', '.join(out)}] }}")

    @cached_property
    def schedule_map(self) -> isl.UnionMap:
        return self._union(self.statement_schedule(st).intersect_domain(self.domains[st.name])
                           for st in self.program.statements)

    @cached_property
    def fully_written(self) -> FrozenSet[str]:
        """The tensors whose every element some statement instance writes, for all sizes the
        kernel accepts (domains are affine, so every instance runs): the runtime allocates them
        uninitialised instead of zero-filled (a 4 MB output's fill was half the time of an
        elementwise kernel).  Answered exactly by isl, once per kernel; a tensor isl cannot
        decide within the budget is left out (zero-filled, as before)."""
        from ..errors import IslBudgetError, PolycError
        from .islutil import isl_budget
        out = set()
        written = self.writes.range()
        for t in self.program.tensors:
            if t.shape is None:
                continue
            dims = [f"a{k}" for k in range(len(t.shape))]
            inside = " and ".join(f"0 <= {d} < {affine_str(n)}" for d, n in zip(dims, t.shape))
            try:
                with isl_budget(f"checking which elements of {t.name} are written"):
                    box = isl.UnionSet(f"{self.pstr} -> {{ {isl_name(t.name)}[{', '.join(dims)}]"
                                       f"{' : ' + inside if inside else ''} }}")     # a 0-d tensor: its one element
                    if box.intersect_params(self.context).is_subset(written):
                        out.add(t.name)
            except (IslBudgetError, PolycError, isl.Error):
                continue
        return frozenset(out)

    @cached_property
    def defined_before_read(self) -> FrozenSet[str]:
        """The written tensors none of whose reads can see a value from before the kernel ran:
        every element the kernel reads it has written earlier (`c[j] = 0.0`, then `c[j] += ...`),
        so the tensor's initial contents never matter.  Exact (isl's flow analysis); a tensor isl
        cannot decide within the budget is left out."""
        from ..errors import IslBudgetError, PolycError
        out = set()
        written = {st.target.tensor for st in self.program.statements}
        for t in self.program.tensors:
            if t.name not in written:
                continue
            try:
                if self.reads_before_writes(t.name, len(t.shape or ())).is_empty():
                    out.add(t.name)
            except (IslBudgetError, PolycError, isl.Error):
                continue
        return frozenset(out)

    def reads_before_writes(self, tensor: str, rank: int) -> isl.UnionMap:
        """The reads of `tensor` (statement instance -> element) that no earlier statement
        instance of the kernel wrote, for the sizes the kernel accepts: they see the value the
        element had before the call.  Exact (isl's flow analysis), under the isl budget."""
        from .islutil import isl_budget
        space = self.tensor_space_set(tensor, rank)
        reads = self.reads.intersect_range(space)
        if reads.is_empty():
            return reads
        with isl_budget(f"checking that {tensor} is written before it is read"):
            flow = (isl.UnionAccessInfo.from_sink(reads).set_must_source(self.writes.intersect_range(space))
                    .set_schedule_map(self.schedule_map).compute_flow())
            return flow.get_may_no_source().intersect_params(self.context)

    def tensor_space_set(self, tensor: str, rank: int) -> isl.UnionSet:
        dims = ", ".join(f"a{k}" for k in range(rank))
        return isl.UnionSet(f"{self.pstr} -> {{ {isl_name(tensor)}[{dims}] }}")

    @cached_property
    def dependences(self) -> "Dependences":
        """Exact dependences of the program, computed once (the model is immutable)."""
        from .dependences import Dependences
        return Dependences(self)

    def statement_by_isl_name(self, name: str) -> Statement:
        return self.program.statement(user_name(name))


def compute_dependences(program: Program) -> "Dependences":
    """The exact dependences of `program` (those of its model)."""
    return PolyModel(program).dependences
