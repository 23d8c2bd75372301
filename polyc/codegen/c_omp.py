"""OpenMP details of the C emitter: work thresholds for parallel loops and reduction accumulators.

- work thresholds: every `#pragma omp parallel for` runs only `if (<trip count> > 1 && <estimated
  work> >= PARALLEL_MIN_WORK)`, else the same loop runs serially in an `else` branch, so a loop with
  one iteration, or too little work to pay for waking the thread pool, never enters libgomp (on a
  loaded machine a wake-up costs milliseconds; even OpenMP's `if(0)` clause enters the runtime).
  The work is estimated from the loop nest itself: trip counts of the inner loops (where their
  bounds are known outside the loop) times the operations of each statement.
- reduction accumulators: a reassociated reduction (`reduction_vector` / `reduction_parallel`
  marks, proven in `polyc.schedule`) keeps its target element in a scalar `pc_acc` for the whole
  loop and hands it to OpenMP's `reduction(op:pc_acc)` clause.  max/min of floats reduce with
  OpenMP's max/min (lanes may order NaN arbitrarily), so a second `reduction(|:pc_nan)` flag
  records whether a NaN was seen and the result is NaN then, as `np.maximum` gives.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

import cgen as c

from .cexpr import wrapping
from .loop_ast import Block, Call, Guard, LExpr, Loop, Node, ids, operand, walk

#: Estimated operations below which a parallel loop runs on one thread (its `if()` clause).  A
#: wake-up of the OpenMP pool costs some microseconds on an idle machine, far more on a loaded one.
PARALLEL_MIN_WORK = 1 << 15

#: The library's global holding the threshold (`PARALLEL_MIN_WORK` unless the runtime changes it:
#: `polyc.runtime.loader.parallel_threshold`, with which `check_kernel` runs parallel loops at
#: test sizes too).
MIN_WORK_SYMBOL = "pc_parallel_min_work"
MIN_WORK_DEFINITION = f"double {MIN_WORK_SYMBOL} = {float(PARALLEL_MIN_WORK)!r};"

#: Iterations assumed for an inner loop whose bounds depend on loops inside the parallel one.
UNKNOWN_TRIP = 8

#: OpenMP reduction operators by statement update.
OMP_OPERATOR = {"+": "+", "*": "*", "max": "max", "min": "min"}


def _upper_bounds(cond: LExpr, iterator: str) -> List[Tuple[LExpr, bool]]:
    """(`ub`, inclusive?) of every `it <= ub` / `it < ub` term of a loop condition, in order."""
    if cond.op in ("<=", "<") and cond.args[0] == LExpr("id", value=iterator):
        return [(cond.args[1], cond.op == "<=")]
    if cond.op == "&&":
        return [b for a in cond.args for b in _upper_bounds(a, iterator)]
    return []


def _bound(cond: LExpr, iterator: str) -> Optional[Tuple[LExpr, bool]]:
    """(`ub`, inclusive?) of a loop condition (the first bound of a conjunction)."""
    bounds = _upper_bounds(cond, iterator)
    return bounds[0] if bounds else None


def trip_count(loop: Loop, text: Callable[[LExpr], str]) -> Optional[str]:
    """C text of `loop`'s trip count (an int64_t expression over the names outside it), or None
    when its condition has no recognisable upper bound."""
    bound = _bound(loop.cond, loop.iterator)
    if bound is None:
        return None
    ub, inclusive = bound
    span = text(ub) if loop.init == LExpr("int", value=0) else f"{operand(text(ub))} - {operand(text(loop.init))}"
    if inclusive:
        span = f"{span} + 1"
    return f"({span})" if loop.step == 1 else f"(({span} + {loop.step - 1}) / {loop.step})"


def statement_work(st) -> int:
    """Operations of one instance of statement `st`: its expression's nodes, plus the store."""
    return 1 + sum(1 for _ in st.value.walk())


def work(node: Node, statements, text: Callable[[LExpr], str], inner: Set[str]) -> str:
    """C text (a double expression) of the operations one execution of `node` makes.  Inner loops
    whose bounds mention iterators in `inner` (loops inside the parallel one) count `UNKNOWN_TRIP`."""
    if isinstance(node, Call):
        return str(statement_work(statements[node.statement]))
    if isinstance(node, Block):
        parts = [work(ch, statements, text, inner) for ch in node.children]
        return "(" + " + ".join(parts) + ")" if parts else "0"
    if isinstance(node, Guard):
        then = work(node.then, statements, text, inner)
        other = work(node.orelse, statements, text, inner) if node.orelse is not None else "0"
        return f"({then} + {other})" if node.orelse is not None else then
    if isinstance(node, Loop):
        body = work(node.body, statements, text, inner)
        trip = trip_count(node, text)
        bounds = (ids(node.cond) | ids(node.init)) - {node.iterator}
        if trip is None or bounds & inner:
            return f"({UNKNOWN_TRIP}.0 * {body})"
        return f"((double)pc_max({trip}, 0) * {body})"
    raise TypeError(node)


def parallel_condition(loop: Loop, statements, text: Callable[[LExpr], str]) -> Optional[str]:
    """C condition under which `loop` runs in parallel: more than one iteration and enough work
    (`PARALLEL_MIN_WORK`); None when the trip count cannot be read from the loop (always parallel).

    The emitter branches on it (`guarded_parallel`) rather than writing an OpenMP `if()` clause:
    libgomp still enters the runtime (team setup, a call per region) for `if(0)`, which doubled
    the time of small kernels that run thousands of regions per call (issue #16)."""
    trip = trip_count(loop, text)
    if trip is None:
        return None
    inner = {x.iterator for x in walk(loop) if isinstance(x, Loop)}
    body = work(loop.body, statements, text, inner)
    return f"{trip} > 1 && (double){trip} * {body} >= {MIN_WORK_SYMBOL}"


#: A set of rates at which an expression grows with the parallel iterator (see `_rates`).
Rates = FrozenSet[Fraction]

#: Most alternative rates one expression keeps before the analysis gives up (min/max of sums).
MAX_RATES = 8


def _rates(e: LExpr, env: Dict[str, Rates]) -> Optional[Rates]:
    """How fast `e` grows when the parallel iterator grows by one: each element is the slope of one
    of the affine pieces `e` may take (a min or max has several).  Names not in `env` (sizes,
    outer iterators) do not move; None where `e` is not affine in the iterators.

    A min/max that mixes moving pieces with still ones keeps only the moving pieces: isl writes the
    still ones as the domain's clamps (`min(N - 1, 32*t + 31)`), active at the last tile only."""
    if e.op == "int":
        return frozenset({Fraction(0)})
    if e.op == "id":
        return env.get(str(e.value), frozenset({Fraction(0)}))
    args = [_rates(a, env) for a in e.args]
    if any(a is None for a in args):
        return None
    if e.op in ("+", "-") and len(args) == 2:
        sign = 1 if e.op == "+" else -1
        out = frozenset(a + sign * b for a in args[0] for b in args[1])
    elif e.op == "neg":
        out = frozenset(-a for a in args[0])
    elif e.op == "*" and len(args) == 2:
        const = [a.value for a in e.args if a.op == "int"]
        if not const:
            return None
        other = args[1] if e.args[0].op == "int" else args[0]
        out = frozenset(const[0] * a for a in other)
    elif e.op in ("floord", "/") and e.args[1].op == "int" and e.args[1].value:
        out = frozenset(a / e.args[1].value for a in args[0])
    elif e.op == "%":
        out = frozenset({Fraction(0)})
    elif e.op in ("min", "max"):
        union = frozenset().union(*args)
        moving = union - {Fraction(0)}
        out = moving or union
    else:
        return None
    return out if len(out) <= MAX_RATES else None


def work_varies(loop: Loop) -> bool:
    """Whether the work of one iteration of `loop` grows or shrinks with its iterator: some loop
    inside has bounds that move at different rates with it (the rows of a triangle, `j <= i`;
    a tile loop `tj <= ti`).  Tiles of a box move both bounds together (`32*t` to `32*t + 31`)
    and count as even.  Bounds the analysis cannot read count as even (no claim made)."""
    def varies(node: Node, env: Dict[str, Rates]) -> bool:
        if isinstance(node, Call):
            return False
        if isinstance(node, Block):
            return any(varies(ch, env) for ch in node.children)
        if isinstance(node, Guard):
            return varies(node.then, env) or (node.orelse is not None and varies(node.orelse, env))
        lower = _rates(node.init, env)
        uppers = [_rates(u, env) for u, _ in _upper_bounds(node.cond, node.iterator)]
        if lower is None or not uppers or any(u is None for u in uppers):
            return varies(node.body, env)  # unreadable bounds: the iterator stays "still"
        upper = frozenset().union(*uppers)
        common = lower & upper
        if not common:
            return True
        return varies(node.body, {**env, node.iterator: common})
    return varies(loop.body, {loop.iterator: frozenset({Fraction(1)})})


def omp_schedule(loop: Loop, text: Callable[[LExpr], str]) -> str:
    """The `schedule` clause of parallel loop `loop`.  Where the work of an iteration grows or
    shrinks with the iterator (`work_varies`: a triangle's rows), about four chunks per thread
    dealt out in turn (`pc_omp_chunk`): whole halves of a triangle split its work 1:3, eight
    chunks dealt in turn within about 10%.  Elsewhere whole shares (`schedule(static)`): chunks
    cost loops that walk columns inside the parallel one (covariance's means: a fresh pass over
    every row per chunk, about 20% at 2 threads)."""
    trip = trip_count(loop, text)
    if trip is None or not work_varies(loop):
        return "schedule(static)"
    return f"schedule(static, pc_omp_chunk({trip}))"


def guarded_parallel(condition: Optional[str], parallel_pragma: str, serial_pragma: Optional[str],
                     loop) -> list:
    """cgen statements running `loop` under `parallel_pragma` when `condition` holds, else the same
    loop on the calling thread under `serial_pragma` (`omp simd ...` where the parallel loop was a
    SIMD one, so the serial copy still vectorises; None for none)."""
    parallel = [c.Pragma(parallel_pragma), loop]
    if condition is None:
        return parallel
    serial = ([c.Pragma(serial_pragma)] if serial_pragma else []) + [loop]
    return [c.If(condition, c.Block(parallel), c.Block(serial))]


@dataclass(frozen=True)
class Accumulator:
    """The scalar `name` that holds a reduction's target element for the duration of a loop."""

    statement: str
    ctype: str
    update: str      # "+", "*", "max", "min"
    nan_flag: bool   # float max/min: track NaNs in `<name>_nan`
    name: str = "pc_acc"

    @property
    def clauses(self) -> str:
        out = f"reduction({OMP_OPERATOR[self.update]}:{self.name})"
        return out + (f" reduction(|:{self.name}_nan)" if self.nan_flag else "")

    def opening(self, target: str) -> list:
        lines = [f"{self.ctype} {self.name} = {target};"]
        if self.nan_flag:
            lines.append(f"int {self.name}_nan = ({self.name} != {self.name});")
        return lines

    def closing(self, target: str) -> str:
        if self.nan_flag:
            return f"{target} = {self.name}_nan ? ({self.ctype})NAN : {self.name};"
        return f"{target} = {self.name};"

    def update_line(self, value: str) -> str:
        acc = self.name
        if self.update in ("+", "*"):     # integers wrap as numpy's (a signed overflow is undefined in C)
            return f"{acc} = {wrapping(acc, self.update, f'({value})', self.ctype)};"
        cmp = ">" if self.update == "max" else "<"
        nan = f"{acc}_nan |= (pc_v != pc_v); " if self.nan_flag else ""
        return f"{{ {self.ctype} pc_v = {value}; {nan}{acc} = pc_v {cmp} {acc} ? pc_v : {acc}; }}"


#: Element types a reduction accumulator supports (OpenMP reductions of C arithmetic types).
ACCUMULATOR_TYPES = ("f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def single_call(node: Node) -> Optional[Call]:
    """The one statement instance of a perfect loop nest (loops and one-child blocks), or None."""
    while True:
        if isinstance(node, Call):
            return node
        if isinstance(node, Block) and len(node.children) == 1:
            node = node.children[0]
        elif isinstance(node, Loop):
            node = node.body
        else:
            return None
