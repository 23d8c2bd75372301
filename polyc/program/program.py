"""`@pc.program`: a Python function over kernels, traced once and run as fused, memory-planned groups.

```python
@pc.program
def mlp(x: pc.f32["B", "D"], w1: pc.f32["D", "H"], b1: pc.f32["H"], w2: pc.f32["H", "D"]):
    h = matmul(A=x, B=w1)
    return matmul(A=gelu(X=bias_add(X=h, b=b1)), B=w2)

y = mlp(x=x, w1=w1, b1=b1, w2=w2)        # compiled on first use for these sizes
mlp.reference(x=x, w1=w1, b1=b1, w2=w2)  # the composition of the operators' references
mlp.kernel                               # every statement of every operator, one Kernel
mlp.plan(**arrays)                       # groups, vendor calls, memory plan
```

The plan depends on the sizes only through the vendor decision (a matrix product of at least
`vendor.VENDOR_FLOPS` runs as BLAS on the C target) and the rows per block (`blocking`: operators
that work row by row run block of rows by block, their intermediates sized for one block), so it
is made per call shape and cached.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..api import Kernel, TARGETS
from ..errors import ArgumentError, PolycError
from ..frontend.reference import bind_sizes
from .arguments import ProgramArguments
from .combine import combined_program, node_internal_tensors
from .dtypes import call_dtypes
from .device import DeviceMemory
from .blocking import RowBlocks, block_rows, row_blocks
from ..runtime.aligned import aligned_bytes, aligned_empty
from .row_loop import BlockWorkers, RowLoop, run_blocks
from .row_driver import RowDriver, record
from .fusion import Group, build_group, group_nodes
from .memory import MemoryPlan, Step, plan_buffers
from .layout import relayout_transposed_operands
from .simplify import remove_dead, share_common
from .trace import Node, ProgramError, TensorHandle, inline_program, returned_handles, trace
from .vendor import Gemm, recognise_gemm, vendor_choices
from ..runtime.forksafe import ForkSafeLock


@dataclass(frozen=True)
class VendorCall:
    """A node bound to a vendor library call instead of generated code."""

    node: Node
    gemm: Gemm

    @property
    def name(self) -> str:
        return self.node.name


Unit = Union[Group, VendorCall]


def _results(u: Unit) -> Tuple[str, ...]:
    """The tensors a unit writes (a group's outputs, a vendor call's product)."""
    return (u.gemm.c,) if isinstance(u, VendorCall) else u.outputs


@dataclass(frozen=True)
class Plan:
    """How one call shape runs: units in order, the memory plan, and why; `loop`: row blocks."""

    units: Tuple[Unit, ...]
    memory: MemoryPlan
    decisions: Tuple[str, ...]
    sizes: Mapping[str, int]
    loop: Optional[RowLoop] = None
    #: the loop's C drivers by the inputs' dtypes (`OperatorProgram._row_driver`; None: not replayable)
    drivers: Dict[tuple, Optional[RowDriver]] = field(default_factory=dict, compare=False, repr=False)


class OperatorProgram:
    """A traced program of kernel calls (see the module docstring)."""

    def __reduce__(self):
        from ..errors import not_picklable
        raise not_picklable(f"the operator program {self.name!r}", "its module, and import the program there")

    def __init__(self, function: Callable, *, target: str = "c", vendor: Union[str, bool] = "auto",
                 fuse: bool = True, contract: Optional[bool] = None, schedule: Optional[str] = "auto",
                 relayout: bool = True, blocks: Union[str, bool, int] = "auto"):
        if target not in TARGETS:
            raise PolycError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
        if vendor not in ("auto", True, False):
            raise PolycError("vendor must be 'auto', True or False")
        if not (blocks is True or blocks is False or blocks == "auto" or (type(blocks) is int and blocks > 0)):
            raise PolycError(f"blocks must be 'auto', True, False or a positive number of rows, not {blocks!r}")
        self.function = function
        self.name = function.__name__
        #: the options it was made with (a backward program, `grad`, is made with the same)
        self.options: Dict[str, Any] = dict(target=target, vendor=vendor, fuse=fuse, contract=contract,
                                            schedule=schedule, relayout=relayout, blocks=blocks)
        self.target = target
        self.vendor = vendor
        self.fuse = fuse
        # A contracted buffer is shared by the iterations of the fused loop, so that loop runs
        # serially; on a GPU that loop is the grid: keep full storage there unless asked.
        self.contract = (target == "c") if contract is None else contract
        # Matrix products form groups of their own (their packed / tiled kernels), unless the
        # caller asked for contraction explicitly (memory first: products fused row by row).
        self.products_apart = contract is not True
        self.schedule = schedule
        tracer, inputs, result = trace(function)
        self.inputs = tuple(inputs)
        self.sizes = tuple(tracer.sizes)
        outs = returned_handles(result, function)
        for name, h in outs:
            if h.producer is None:
                raise ProgramError(f"program {self.name} returns its input {h.name} unchanged as {name}")
        #: what the function returns, by name, as traced (before common results are shared)
        self.returned: Tuple[Tuple[str, str], ...] = tuple((n, h.name) for n, h in outs)
        self.trace_nodes: Tuple[Node, ...] = tuple(tracer.nodes)
        nodes, layout_alias, layout_notes, relayouts = (relayout_transposed_operands(list(tracer.nodes), tracer)
                                                        if relayout else (list(tracer.nodes), {}, [], ()))
        self.handles = dict(tracer.handles)
        nodes, alias, notes = share_common(nodes, [layout_alias.get(h.name, h.name) for _, h in outs])
        self.outputs: Tuple[Tuple[str, str], ...] = tuple(
            (n, alias.get(layout_alias.get(h.name, h.name), layout_alias.get(h.name, h.name))) for n, h in outs)
        kind = "single" if isinstance(result, TensorHandle) else "dict" if isinstance(result, dict) else "tuple"
        self.arguments = ProgramArguments(self.name, self.inputs, tuple(self.handles[x].dtype for x in self.inputs),
                                          target, self.outputs, kind, tuple(len(self.handles[x].shape) for x in self.inputs))
        nodes, dead = remove_dead(nodes, [p for _, p in self.outputs])
        self.nodes: Tuple[Node, ...] = tuple(nodes)
        self.notes: Tuple[str, ...] = tuple(layout_notes + notes + dead)
        self._gemms = {n.index: recognise_gemm(n) for n in self.nodes}
        kept = {n.index for n in self.nodes}
        self._relayouts = {r.product: r for r in relayouts if r.product in kept and r.transpose in kept}
        # Row blocks (`blocking`): on the C target (device arrays are not sliced), unless the caller
        # asked for row-by-row contraction (contract=True) or turned them off.
        use_blocks = blocks is not False and target == "c" and contract is not True
        self.blocks: Optional[RowBlocks] = (row_blocks(self.nodes, self.handles, [p for _, p in self.outputs],
                                                       self.sizes) if use_blocks else None)
        self._block_rows = blocks if type(blocks) is int else None
        self._blocked_gemms = ({n.index: recognise_gemm(n) for n in self.blocks.blocked}
                               if self.blocks is not None else {})
        for n in self.blocks.before if self.blocks is not None else ():   # accumulations' starts
            self._gemms.setdefault(n.index, None)
        self._plans: Dict[tuple, Plan] = {}
        self._dtypes: Dict[tuple, Dict[str, np.dtype]] = {}
        self._groupings: Dict[Tuple[int, ...], Tuple[Tuple[Unit, ...], Tuple[str, ...]]] = {}
        self._compiled: Dict[int, Tuple[Group, Any]] = {}
        self._block_workers = BlockWorkers(self.name)   # threads and buffers for row blocks beside the caller's
        self._kernel: Optional[Kernel] = None
        self._lock = ForkSafeLock(reentrant=True)
        self._host_pools = threading.local()
        self._last: Optional[Plan] = None

    # -- the whole program as one kernel ---------------------------------------------------------
    @property
    def kernel(self) -> Kernel:
        """Every statement of every operator in call order, as one polyc Kernel (intermediates are
        temps, results are outputs): the combined polyhedral program."""
        with self._lock:
            if self._kernel is None:
                outs = {p for _, p in self.outputs}
                roles = {p: ("input" if p in self.inputs else "output" if p in outs else "temp")
                         for n in self.nodes for _, p in n.bindings}
                self._kernel = Kernel(combined_program(self.name, self.nodes, self.handles, roles, self.sizes))
            return self._kernel

    # -- the backward pass --------------------------------------------------------------------------
    def grad(self, of: str, wrt: Union[str, Sequence[str]], *, saved: Union[str, Sequence[str]] = (),
             pad_borders: bool = True) -> "OperatorProgram":
        """The backward pass as an operator program (`polyc.program.backward`): called with this
        program's inputs, the tensors named in `saved` and `<of>_grad`, it returns a dict of the
        gradients `<x>_grad` of `wrt`, run like any program (fused groups, BLAS for its matrix
        products, row blocks, a memory plan).  `pc.grad(program, ...)` instead differentiates the
        traced kernel as one kernel.  `saved` names outputs (as returned) or intermediates (by
        their traced names) passed in rather than recomputed."""
        from .backward import backward_program
        return backward_program(self, of, wrt, saved=saved, pad_borders=pad_borders)

    # -- reference ---------------------------------------------------------------------------------
    def reference(self, *args: Any, **arrays: Any) -> Any:
        """The composition of the operators' references, in call order, on numpy arrays."""
        env = self.arguments.check(self.arguments.bind(args, arrays))
        sizes = self._size_values(env)
        for node in self.nodes:
            roles = {t.name: t.role for t in node.kernel.program.tensors}
            kwargs = {k: env[p] for k, p in node.bindings if roles[k] == "input"}
            kwargs.update(dict(node.scalars))
            if node.kernel.function is not None:   # a loop kernel writes into arrays it is given
                for k, p in node.bindings:
                    if roles[k] == "output":
                        h = self.handles[p]
                        kwargs[k] = np.zeros(tuple(d.evaluate(sizes) for d in h.shape), h.dtype.numpy)
            result = node.kernel.reference(**kwargs)
            outs = [(k, p) for k, p in node.bindings if roles[k] == "output"]
            if len(outs) == 1:
                env[outs[0][1]] = result
            else:
                for k, p in outs:
                    env[p] = result[k]
        return self.arguments.result(env)

    # -- planning ----------------------------------------------------------------------------------
    def _size_values(self, env: Mapping[str, np.ndarray]) -> Dict[str, int]:
        """The program's sizes for these inputs; an ArgumentError where they leave a tensor of a
        node with a negative extent (inputs too small for a chain of shrinking operators), as
        the kernel alone refuses it."""
        sizes = bind_sizes(self.kernel.program, dict(env), {})
        for n in self.nodes:
            for p in n.outputs:
                for axis, d in enumerate(self.handles[p].shape):
                    if d.evaluate(sizes) < 0:
                        given = ", ".join(f"{k}={v}" for k, v in sizes.items())
                        raise ArgumentError(f"program {self.name}: {p}.shape[{axis}] = {d} = {d.evaluate(sizes)} "
                                            f"is negative with {given}: the inputs are too small for {n.name}")
        return sizes

    def _needed_after(self, order: Sequence[Node], keep: Sequence[str] = (),
                      reads: Optional[Mapping[int, str]] = None) -> Dict[int, Tuple[str, ...]]:
        """Tensors still needed after each node of `order`: the program's outputs, `keep`, and what
        later nodes read (`reads`: a further tensor a node's vendor call reads, by node index)."""
        outs = {p for _, p in self.outputs} | set(keep)
        needed: Dict[int, Tuple[str, ...]] = {}
        later: set = set(outs)
        for n in reversed(order):
            needed[n.index] = tuple(later)
            later |= set(n.inputs) | ({reads[n.index]} if reads and n.index in reads else set())
        return needed

    def plan(self, *args: Any, **arrays: Any) -> Plan:
        """The plan for these arrays' shapes (groups, vendor calls, memory), made once per shape."""
        env = self.arguments.check(self.arguments.bind(args, arrays))
        plan = self._last = self._plan(self._size_values(env), self._element_bytes(env))
        return plan

    def _element_bytes(self, env: Mapping[str, np.ndarray]) -> int:
        """The widest element of the call's tensors: every buffer of the plan holds any of them."""
        return max(d.itemsize for d in self._call_dtypes(env).values())

    def _call_dtypes(self, env: Mapping[str, np.ndarray]) -> Dict[str, np.dtype]:
        """Every tensor's dtype for a call with these inputs (`dtypes.call_dtypes`), once per
        signature of input dtypes."""
        key = tuple(env[n].dtype.str for n in self.inputs)
        found = self._dtypes.get(key)
        if found is None:
            found = self._dtypes[key] = call_dtypes(self.nodes, self.handles, {n: env[n].dtype for n in self.inputs})
        return found

    def _plan(self, sizes: Mapping[str, int], itemsize: int) -> Plan:
        """The plan of one call shape, made once: which products go to the vendor (and why) and
        the memory plan depend on the sizes, the groups only on the vendor choice (`_units`)."""
        key = (itemsize, tuple(sorted(sizes.items())))
        with self._lock:
            if key in self._plans:
                return self._plans[key]
            plan = self._blocked_plan(sizes, itemsize) if self.blocks is not None else None
            if plan is None:
                vendored, decisions = self._vendor_choices(sizes)
                units, group_notes = self._units(vendored, bypass=self._bypassed(vendored))
                plan = Plan(units, self._memory(units, sizes, itemsize), decisions + group_notes, dict(sizes))
            if len(self._plans) >= 64:   # one entry per call shape: bounded like any cache
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
            return plan

    def _vendor_choices(self, sizes: Mapping[str, int], nodes: Optional[Sequence[Node]] = None,
                        gemms: Optional[Mapping[int, Optional[Gemm]]] = None) -> Tuple[Tuple[int, ...], Tuple[str, ...]]:
        """`vendor.vendor_choices` of `nodes` (default: all) with this program's options."""
        return vendor_choices(self.nodes if nodes is None else nodes, self._gemms if gemms is None else gemms, sizes,
                              self.target, self.vendor, self.products_apart)

    def _bypassed(self, vendored: Sequence[int]) -> Tuple[int, ...]:
        """The re-layouts (`layout`) not run because every product reading them is a vendor call,
        which reads the original operand transposed instead."""
        outs = {p for _, p in self.outputs}
        return tuple(sorted(r.transpose for r in self._relayouts.values() if r.transposed not in outs and all(
            n.index in vendored and n.index in self._relayouts for n in self.nodes if r.transposed in n.inputs)))

    def _units(self, vendored: Tuple[int, ...], part: str = "all", first: int = 0, bypass: Tuple[int, ...] = ()
               ) -> Tuple[Tuple[Unit, ...], Tuple[str, ...]]:
        """The fused groups and vendor calls in order, with a line per group (made once per choice
        of vendored products: grouping never depends on the sizes).  `part`: "all" the nodes, or
        with row blocks the nodes run "before" them or "blocked"; `first` numbers the groups;
        `bypass`: re-layouts not run (`_bypassed`)."""
        if part == "all":
            nodes, handles, sizes, gemms, keep = self.nodes, self.handles, self.sizes, self._gemms, ()
        else:
            b = self.blocks
            assert b is not None
            if part == "before":
                nodes, handles, sizes, gemms = b.before, self.handles, self.sizes, self._gemms
                keep = tuple(p for n in b.blocked for p in n.inputs) + tuple(p for _, p in b.sliced)
            else:
                nodes, handles, sizes, gemms, keep = b.blocked, b.handles, self.sizes + (b.size,), self._blocked_gemms, ()
        nodes = [n for n in nodes if n.index not in bypass]
        with self._lock:
            cache_key = (part, vendored, bypass)
            if cache_key in self._groupings:
                return self._groupings[cache_key]
            decisions: List[str] = []
            units: List[Unit] = []
            # a BLAS call whose re-layout is bypassed reads the original operand: keep it stored
            originals = {i: r.original for i, r in self._relayouts.items() if i in vendored and r.transpose in bypass}
            needed = self._needed_after(nodes, keep, originals)
            run: List[Node] = []

            def flush() -> None:
                if not run:
                    return
                apart = {n.index for n in run if gemms[n.index] is not None} if self.products_apart else set()
                apart |= {n.index for n in run if n.updates}   # accumulations across row blocks
                for members in group_nodes(self.name, run, handles, sizes, needed, fuse=self.fuse, apart=apart):
                    gname = f"{self.name}_g{first + len(units)}"
                    g = build_group(gname, members, handles, sizes, needed[members[-1].index],
                                    fuse=self.fuse, contract_storage=self.contract)
                    units.append(g)
                    decisions.append(f"{gname}: {' + '.join(m.name for m in members)}: {g.note}" +
                                     (f"; contracted {', '.join(f'{t} (dim {d} dropped)' for t, d, _ in g.contracted)}"
                                      if g.contracted else ""))
                run.clear()

            for n in nodes:
                if n.index in vendored:
                    flush()
                    gemm, r = gemms[n.index], self._relayouts.get(n.index)
                    if r is not None and r.transpose in bypass:
                        gemm = replace(gemm, b=r.original, transpose_b=True)
                        decisions.append(f"{n.name}: the BLAS call reads {r.original} transposed; its re-layout "
                                         f"is not run")
                    units.append(VendorCall(n, gemm))
                else:
                    run.append(n)
            flush()
            self._groupings[cache_key] = (tuple(units), tuple(decisions))
            return self._groupings[cache_key]

    def _blocked_plan(self, sizes: Mapping[str, int], itemsize: int) -> Optional[Plan]:
        """The plan with row blocks, or None when one block would hold every row anyway."""
        b = self.blocks
        assert b is not None
        from ..target import Target
        host = Target.host()
        threads = host.cores    # the threads OpenMP runs (`target.openmp_threads`)
        if b.accumulated and not b.combine:
            threads = 1         # sums kept in order: blocks one after another, each kernel's own threads
        total = b.extent.evaluate(sizes)
        if self._block_rows is not None:
            rows = self._block_rows
        else:
            from ..schedule.packing import default_blocking
            rows = block_rows(total, default_blocking(itemsize, host)[3], threads)
        if rows >= total:
            return None
        threads = min(threads, -(-total // rows))
        block_sizes = dict(sizes)
        block_sizes[b.size] = rows
        v_before, d_before = self._vendor_choices(sizes, b.before)
        v_blocked, d_blocked = self._vendor_choices(block_sizes, b.blocked, self._blocked_gemms)
        bypass = self._bypassed(v_before + v_blocked)
        before, n_before = self._units(v_before, "before", bypass=bypass)
        blocked, n_blocked = self._units(v_blocked, "blocked", first=len(before), bypass=bypass)
        units = before + blocked
        inside = set(b.intermediates)
        handed = tuple(t for u in blocked for t in _results(u) if t in inside)
        if not handed:
            return None          # one fused group already: blocks would only add calls
        in_c = all(isinstance(u, Group) for u in blocked)
        if b.accumulated and not in_c:
            threads = 1         # only the C loop gives each thread copies of the sums
        if self._block_rows is None and threads > 1 and not in_c:
            # Measured: blocks side by side on Python threads (a vendor call among them, so no C
            # loop) ran the attention head in 1.1-2.1 ms against 0.9 ms whole; ask with blocks=N.
            return None
        if self._block_rows is None:
            # Every block reads the operands it does not slice again (a product packs them again):
            # worth it while that is no more than the intermediates a block keeps in cache.
            again = self._whole_reads(blocked, b, block_sizes, itemsize)
            kept = sum(self._bytes(b.handles[t].shape, block_sizes, itemsize) for t in handed)
            if again > kept:
                return None
        loop = RowLoop(b, rows, len(before), threads, itemsize, handed, in_c, b.combine if threads > 1 else ())
        line = loop.describe([u.name for u in blocked], [u.name for u in before])
        memory = self._memory(units, sizes, itemsize, loop)
        if self._block_rows is None and memory.planned_peak >= memory.unfused_peak:
            return None          # small sizes: every thread's block and sums outweigh what blocks save
        return Plan(units, memory, d_before + d_blocked + n_before + n_blocked + (line,), dict(sizes), loop)

    def _whole_reads(self, units: Sequence[Unit], b: RowBlocks, sizes: Mapping[str, int], itemsize: int) -> int:
        """Bytes the units of a block read whole (neither sliced by rows nor made in the block)."""
        by_rows = {alias for alias, _ in b.sliced} | {t for u in units for t in _results(u)}
        names = {t for u in units for t in (u.inputs if isinstance(u, Group) else (u.gemm.a, u.gemm.b))}
        return sum(self._bytes(b.handles[t].shape, sizes, itemsize) for t in names - by_rows)

    def _bytes(self, shape, sizes: Mapping[str, int], itemsize: int) -> int:
        n = 1
        for d in shape or ():
            n *= max(0, d.evaluate(sizes))
        return n * itemsize

    def _memory(self, units: Sequence[Unit], sizes: Mapping[str, int], itemsize: int,
                loop: Optional[RowLoop] = None) -> MemoryPlan:
        """The memory plan of `units`; with row blocks, the blocked units' tensors at one block's rows."""
        outs = [p for _, p in self.outputs]
        tensor_bytes = {name: self._bytes(h.shape, sizes, itemsize) for name, h in self.handles.items()}
        planned_bytes = dict(tensor_bytes)
        block_sizes = dict(sizes)
        if loop is not None:
            block_sizes[loop.blocks.size] = loop.rows
            planned_bytes.update({name: self._bytes(h.shape, block_sizes, itemsize)
                                  for name, h in loop.blocks.handles.items()})
        # A loop unit reading rows of a tensor computed whole before the loop reads that tensor.
        whole_of = dict(loop.blocks.sliced) if loop is not None else {}
        steps = []
        for k, u in enumerate(units):
            at = block_sizes if loop is not None and k >= loop.first else sizes
            nodes = u.nodes if isinstance(u, Group) else (u.node,)
            produced = tuple(p for n in nodes for p in n.outputs)
            read = (p for n in nodes for p in n.inputs) if isinstance(u, Group) else (u.gemm.a, u.gemm.b)
            reads = tuple(whole_of.get(p, p) for p in read if whole_of.get(p, p) not in self.inputs)
            if isinstance(u, Group):
                decls = u.kernel.program.tensor_map
                scratch = sum(self._bytes(decls[t].shape, at, itemsize) for t in u.temps)
                produced = tuple(p for p in produced if p in u.outputs)
            else:
                scratch = 0
            steps.append(Step(u.name, produced, reads, scratch))
        unfused = []
        for n in self.nodes:
            scratch = sum(self._bytes(t.shape, sizes, itemsize) for t in node_internal_tensors(n))
            unfused.append(Step(n.name, n.outputs, tuple(p for p in n.inputs if p not in self.inputs), scratch))
        # The loop's units run again for every block: what they read from before the loop stays.
        keep = ()
        if loop is not None:
            before = {t for st in steps[:loop.first] for t in st.produces}
            keep = tuple(sorted({t for st in steps[loop.first:] for t in st.reads if t in before}))
        plan = plan_buffers(steps, planned_bytes, outs, unfused, tensor_bytes, keep)
        if loop is not None and loop.threads > 1:   # each other thread's block buffers and sums
            own = tuple(t for t in loop.buffers if t not in outs) + tuple(t for t, _ in loop.combine)
            extra = (loop.threads - 1) * sum(planned_bytes[t] for t in own)
            plan = replace(plan, planned_peak=plan.planned_peak + extra)
        return plan

    # -- running -----------------------------------------------------------------------------------
    def compiled_groups(self) -> List[Tuple[Group, Any]]:
        """(group, its compiled kernel) for every group compiled so far, in compilation order."""
        with self._lock:
            return [(g, f) for g, f in self._compiled.values()]

    def _compiled_group(self, g: Group) -> Any:
        """The group's compiled kernel, compiled once: groups are made once per grouping and kept, so
        the group object itself is the key (row blocks call each group once per block)."""
        from ..api import compile as compile_kernel
        found = self._compiled.get(id(g))
        if found is not None and found[0] is g:
            return found[1]
        with self._lock:
            if id(g) not in self._compiled or self._compiled[id(g)][0] is not g:
                schedule = self.schedule if self.target == "c" else None
                self._compiled[id(g)] = (g, compile_kernel(g.kernel, schedule, target=self.target))
            return self._compiled[id(g)][1]

    def __call__(self, *args: Any, **arrays: Any) -> Any:
        """Run the program: arrays by name, or by position in the function's parameter order.
        Inside another program's trace, its operators join that program (`trace.inline_program`)."""
        arrays = self.arguments.bind(args, arrays)
        if any(getattr(v, "__polyc_traced__", False) for v in arrays.values()):
            return inline_program(self.name, self.function, {x: self.handles[x] for x in self.inputs}, arrays)
        env = self.arguments.check(arrays)
        sizes = self._size_values(env)
        dtypes = self._call_dtypes(env)
        plan = self._plan(sizes, max(d.itemsize for d in dtypes.values()))
        self._last = plan
        # on the GPU every buffer is device memory and intermediates stay there (`device`)
        gpu = DeviceMemory({k: arrays[k] for k in self.inputs}) if self.target == "cuda" else None
        if gpu is not None:
            env = dict(gpu.inputs)
        pool = gpu.pool(plan.memory.slot_bytes) if gpu else self._host_pool(plan)
        outs = {p for _, p in self.outputs}

        def buffer(name: str, at: Mapping[str, int] = sizes, handles: Mapping[str, TensorHandle] = self.handles,
                   slots: Optional[Mapping[str, np.ndarray]] = None) -> Any:
            """Tensor `name` at sizes `at`: a new output array, or a view of its planned buffer (of
            its own buffer in `slots`, for a row-block worker's intermediates)."""
            h = handles[name]
            dt = h.dtype.numpy if h.dtype is not None else dtypes.get(name, np.dtype(np.float64))
            shape = tuple(d.evaluate(at) for d in h.shape)
            if name in outs:
                return gpu.empty(shape, dt) if gpu else aligned_empty(shape, dt)
            n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            slot = slots[name] if slots is not None else pool[plan.memory.slot_of[name]]
            return DeviceMemory.view(slot, n, shape, dt) if gpu else slot[:n].view(dt).reshape(shape)

        loop = plan.loop
        for u in plan.units[:loop.first] if loop is not None else plan.units:
            self._run_unit(u, env, buffer)
        if loop is not None:
            self._run_blocks(plan, plan.units[loop.first:], env, sizes, buffer)
        return gpu.result(self.arguments.result(env)) if gpu else self.arguments.result(env)

    def _run_unit(self, u: Unit, env: Dict[str, Any], out: Callable[[str], Any]) -> None:
        """Run one unit on the arrays of `env`, its results in `out(name)` (and then in `env`)."""
        if isinstance(u, VendorCall):
            env[u.gemm.c] = u.gemm.run(env, out(u.gemm.c))
            return
        kwargs = {t: env[t] for t in u.inputs}
        for t in u.outputs:
            env[t] = kwargs[t] = out(t)
        self._compiled_group(u)(**kwargs)

    def _run_blocks(self, plan: Plan, units: Sequence[Unit], env: Dict[str, Any], sizes: Mapping[str, int],
                    buffer: Callable[..., Any]) -> None:
        """Row blocks: in one C loop (`row_driver`) where every unit is a compiled group, else from
        Python (`row_loop.run_blocks`); the program's outputs are made whole in `env` first."""
        loop = plan.loop
        assert loop is not None
        outs = {p for _, p in self.outputs}
        made = {t for u in units for t in _results(u) if t in outs}
        for t in made:
            env[t] = buffer(t)
        driver = self._row_driver(plan, units, env, sizes, made, buffer) if loop.in_c else None
        if driver is not None:
            at = dict(sizes)
            at[loop.blocks.size] = loop.rows
            sums = dict(loop.combine)   # thread 0 adds into the output itself
            planned = {t: env[t] if t in sums else buffer(t, at, loop.blocks.handles) for t in driver.buffers}
            driver.run(env, loop.blocks.extent.evaluate(sizes), planned)
            return

        def unit_bytes(name: str, at: Mapping[str, int]) -> int:
            return self._bytes(loop.blocks.handles[name].shape, at, loop.itemsize)
        run_blocks(loop, units, env, sizes, outputs=made, buffer=buffer, run_unit=self._run_unit,
                   workers=self._block_workers, nbytes=unit_bytes)

    def _row_driver(self, plan: Plan, units: Sequence[Unit], env: Dict[str, Any], sizes: Mapping[str, int],
                    outputs: set, buffer: Callable[..., Any]) -> Optional[RowDriver]:
        """The C row loop of `plan` for inputs of these dtypes (recorded on first use and kept on the
        plan; the inputs are C-contiguous and of the plan's sizes, so their dtypes say the rest)."""
        key = tuple(env[n].dtype.str for n in self.inputs)
        with self._lock:
            if key not in plan.drivers:
                plan.drivers[key] = record(plan.loop, units, env, sizes, outputs=outputs, buffer=buffer,
                                           compiled=self._compiled_group)
            return plan.drivers[key]

    def _host_pool(self, plan: Plan) -> List[np.ndarray]:
        """The planned buffers for `plan`, kept between calls in the calling thread: fresh buffers
        of a few MB come from the OS every call (glibc maps them), and zeroing those pages cost
        the attention head at S=1024 a fifth of its time.  Intermediates never leave a call
        (outputs are fresh arrays), so reusing them is invisible; one set per thread keeps
        concurrent calls apart, and only the latest few shapes are kept."""
        pools = getattr(self._host_pools, "by_plan", None)
        if pools is None:
            pools = self._host_pools.by_plan = {}
        pool = pools.get(id(plan))
        if pool is None or pool[0] is not plan:
            if len(pools) >= 4:
                pools.pop(next(iter(pools)))
            pool = pools[id(plan)] = (plan, [aligned_bytes(n) for n in plan.memory.slot_bytes])
        return pool[1]

    # -- views -------------------------------------------------------------------------------------
    @property
    def groups(self) -> Tuple[Unit, ...]:
        """The units of the most recent call's plan (fused groups and vendor calls)."""
        if self._last is None:
            raise PolycError(f"program {self.name} has no plan yet: call it, or use .plan(**arrays)")
        return self._last.units

    @property
    def memory(self) -> MemoryPlan:
        """The memory plan of the most recent call: planned vs unfused peak of intermediates."""
        if self._last is None:
            raise PolycError(f"program {self.name} has no plan yet: call it, or use .plan(**arrays)")
        return self._last.memory

    def explain(self) -> str:
        """What the last plan decided, one line each."""
        plan = self._last
        lines = [f"program {self.name}: {len(self.nodes)} operators"] + [f"  {n}" for n in self.notes]
        if plan is not None:
            lines += [f"  {d}" for d in plan.decisions] + [f"  {plan.memory.summary()}"]
        return "\n".join(lines)

    def __repr__(self) -> str:
        ops = ", ".join(n.name for n in self.nodes)
        return f"<polyc program {self.name}({', '.join(self.inputs)}): {ops}>"

    def _repr_html_(self) -> str:
        from .html import program_html
        return program_html(self)


def program(function: Optional[Callable] = None, **options: Any) -> Any:
    """Decorator: `@pc.program` or `@pc.program(target="cuda-emu", vendor=False)`."""
    if function is None:
        return lambda fn: OperatorProgram(fn, **options)
    return OperatorProgram(function, **options)
