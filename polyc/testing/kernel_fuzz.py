"""Differential fuzzing of whole kernels: random kernels x random legal schedules x targets.

Each case (seed, index) draws one kernel (Einstein notation or affine-Python loops, from
`kernel_gen_einsum` / `kernel_gen_loops`), one schedule (source order, `"auto"`, or a random
primitive sequence from the schedule fuzzer, each step proven legal or refused), one target
(`c` or `cuda-emu`), C flags and two or three size draws.  The kernel is compiled once (sizes are
symbols, so one binary serves every draw) and each draw is compared with the reference
(`kernel.reference`: the numpy interpreter for Einstein kernels, the Python itself for loops):
NaN and inf positions must match exactly, finite values within a tolerance scaled by the element
type and the magnitude the values can reach.

Outcomes: `ok`; `refused` (a typed PolycError: counted by class, never a failure by itself);
`discarded` (the reference overflowed, so C's behaviour is undefined); `mismatch` (a silent wrong
answer) and `crash` (an untyped exception) are failures.  Everything is deterministic per
(seed, index); `python -m polyc.testing.kernel_campaign --show INDEX --seed S` prints a case as
source plus schedule JSON.
"""
from __future__ import annotations

import random
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..errors import IllegalScheduleError, IslBudgetError, PolycError, ReferenceFailedError
from ..target import Target
from .kernel_compare import compare_outputs, only_nan_lost, tolerance_eps
from .kernel_gen_common import GeneratedKernel, draw_array, draw_sizes
from .kernel_gen_einsum import generate_einsum
from .kernel_gen_loops import generate_loops

TARGETS = ("c", "cuda-emu")
SCHEDULE_KINDS = {"source": 2, "auto": 2, "random": 6}


@dataclass(frozen=True)
class FuzzCase:
    """Everything one case runs, drawn deterministically from (seed, index)."""

    seed: int
    index: int
    kernel: GeneratedKernel
    schedule_kind: str            # "source", "auto" or "random"
    schedule_seed: int
    target: str
    flags: Optional[Tuple[str, ...]]
    specialise: bool
    sizes: Tuple[Dict[str, int], ...]
    data_seed: int
    specials: float               # fraction of NaN/inf/zero entries in float inputs
    nan_free: bool = False        # replace NaN in the inputs by 0 (triage: is NaN the trigger?)
    steps: Optional[Tuple[str, ...]] = None   # explicit primitive calls instead of the seed's (minimiser)
    finite_only: bool = False     # replace NaN and inf in the inputs by 0 (triage)

    def describe(self, schedule_json: Optional[str] = None) -> str:
        """The case as text: kernel source, schedule, target, flags, sizes."""
        flags = " ".join(self.flags) if self.flags else "(default)"
        kind = f"steps {list(self.steps)}" if self.steps is not None else self.schedule_kind
        return (f"# kernel_fuzz case seed={self.seed} index={self.index}\n{self.kernel.text()}\n"
                f"# schedule: {kind}" + (f" {schedule_json}" if schedule_json else "") +
                f"\n# target={self.target} flags={flags} specialise={self.specialise} "
                f"sizes={list(self.sizes)} specials={self.specials}")


@dataclass
class CaseResult:
    """What running one case gave: `status` plus the counts it contributes."""

    case: FuzzCase
    status: str = "ok"             # ok | refused | discarded | mismatch | crash
    stage: str = ""                # kernel | schedule | compile | call | reference | compare
    detail: str = ""
    schedule_json: Optional[str] = None
    steps: Counter = field(default_factory=Counter)
    runs: int = 0
    triage: str = ""               # class of a failure (`kernel_triage.classify`), set by campaigns
    failed_sizes: Optional[Dict[str, int]] = None   # the size draw that mismatched
    only_nan_lost: bool = False    # every difference: NaN expected, a number computed

    def report(self) -> str:
        return f"{self.status} at {self.stage}: {self.detail}\n{self.case.describe(self.schedule_json)}"


def make_case(seed: int, index: int) -> FuzzCase:
    """The case (seed, index): its own random stream, so any case is rebuilt without the others."""
    rng = random.Random(f"polyc-kernel-fuzz:{seed}:{index}")
    name = f"kfz_{seed}_{index}"
    kernel = generate_einsum(rng, name) if rng.random() < 0.55 else generate_loops(rng, name)
    kinds = list(SCHEDULE_KINDS)
    kind = rng.choices(kinds, weights=[SCHEDULE_KINDS[k] for k in kinds])[0]
    target = rng.choice(TARGETS)
    # Cheap flags mostly (compiling dominates a case); optimisation must not change results.
    flags = rng.choice([("-O1",), ("-O0",), ("-O0",), None]) if target == "c" else rng.choice([None, ("-O0",)])
    return FuzzCase(seed, index, kernel, kind, rng.randrange(2**31), target, flags,
                    specialise=(kind == "auto" and rng.random() < 0.25),
                    sizes=tuple(draw_sizes(rng, ("N", "M"), 2)),
                    data_seed=rng.randrange(2**31), specials=rng.choice([0.0, 0.0, 0.1, 0.3]))


#: Extra primitives drawn for the CUDA targets: explicit block and thread mappings.
GPU_PRIMITIVES = {"map_to_blocks": 3, "map_to_threads": 3}


def random_schedule(kernel, seed: int, steps: Counter, max_steps: int = 4, target: str = "c"):
    """A random legal schedule: primitive calls from the schedule fuzzer (plus explicit GPU
    mappings for "cuda-emu"), each kept only if polyc proves it legal (refusals are counted in
    `steps`)."""
    from .fuzz import PRIMITIVES, call_text, random_call
    rng = random.Random(seed)
    s = kernel.schedule()
    primitives = {**PRIMITIVES, **GPU_PRIMITIVES} if target != "c" else PRIMITIVES
    for _ in range(rng.randint(1, max_steps)):
        call = random_call(s, rng, primitives)
        try:
            s = getattr(s, call[0])(*call[1], **call[2])
        except IllegalScheduleError:
            steps["illegal"] += 1
            continue
        except IslBudgetError:
            steps["budget"] += 1
            continue
        except PolycError as e:
            steps["invalid:" + type(e).__name__] += 1
            continue
        steps["legal"] += 1
        steps["call:" + call_text(call).split("(")[0]] += 1
    return s


def replay(schedule, calls: Sequence[str]):
    """Apply primitive calls written as text (`"tile(i=2)"`, a schedule's `history`)."""
    import ast
    for text in calls:
        node = ast.parse(text, mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            raise ValueError(f"not a primitive call: {text!r}")
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        schedule = getattr(schedule, node.func.id)(*args, **kwargs)
    return schedule


def case_inputs(case: FuzzCase, kernel, sizes: Dict[str, int], draw: int) -> Dict[str, Any]:
    """Arrays for every non-temporary tensor (Einstein outputs are left to the callee to
    allocate), scalar values, and the sizes no passed array determines."""
    program = kernel.program
    rng = np.random.default_rng([case.data_seed, draw])
    declared = {n: d for n, d, _ in case.kernel.declared}
    out: Dict[str, Any] = {}
    shaped: set = set()
    for t in program.tensors:
        if t.role == "temp" or (t.role == "output" and case.kernel.language == "einstein"):
            continue
        shape = tuple(int(e.evaluate(sizes)) for e in (t.shape or ()))
        dtype = declared.get(t.name) or (t.dtype.name if t.dtype else "f64")
        a = draw_array(rng, shape, dtype, case.specials)
        if a.dtype.kind == "f" and (case.nan_free or case.finite_only):
            a = np.where(np.isnan(a) | (np.isinf(a) & case.finite_only), 0, a).astype(a.dtype)
        out[t.name] = a
        for e in t.shape or ():
            shaped.update(e.variables)
    for name, dtype in case.kernel.scalars:
        out[name] = float(rng.uniform(0.5, 1.5)) if dtype.startswith("f") else int(rng.integers(1, 4))
    from ..runtime.arguments import size_symbols
    for name in size_symbols(program):
        if name not in shaped:
            out[name] = int(sizes[name])
    return out


def _copy(args: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _written(kernel, result: Any, passed: Dict[str, Any]) -> Dict[str, np.ndarray]:
    names = [t.name for t in kernel.program.tensors if t.role in ("output", "inout")]
    got = dict(result) if isinstance(result, dict) else ({names[0]: result} if len(names) == 1 and
                                                          isinstance(result, np.ndarray) else {})
    return {n: np.asarray(got[n] if n in got else passed[n]) for n in names if n in got or n in passed}


def run_case(case: FuzzCase, reference: Optional[Callable[..., Any]] = None) -> CaseResult:
    """Build, schedule, compile and run one case against the reference (`reference(kernel)`
    gives another oracle, e.g. for triage)."""
    import polyc as pc
    res = CaseResult(case)

    def fail(status: str, stage: str, detail: str) -> CaseResult:
        res.status, res.stage, res.detail = status, stage, detail
        return res

    try:
        kernel = case.kernel.build()
    except PolycError as e:
        return fail("refused", "kernel", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - an untyped exception is a finding
        return fail("crash", "kernel", _trace(e))
    target = Target.resolve(case.target)   # the fuzz case names a kind; its facts are this machine's
    try:
        if case.steps is not None:
            sched = replay(kernel.schedule(), case.steps)
            res.schedule_json = sched.to_json()
        elif case.schedule_kind == "random":
            sched: Any = random_schedule(kernel, case.schedule_seed, res.steps, target=case.target)
            res.schedule_json = sched.to_json()
        elif case.schedule_kind == "auto" and target.is_cpu:
            from ..schedule.auto import auto_schedule
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sched = auto_schedule(kernel, target)
            res.schedule_json = sched.to_json()
        else:
            sched = kernel.schedule()
    except PolycError as e:
        return fail("refused", "schedule", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001
        return fail("crash", "schedule", _trace(e))
    try:
        opts: Dict[str, Any] = {"target": target}
        if case.flags is not None:
            opts["flags"] = list(case.flags)
        if target.is_cpu:
            opts["specialise"] = case.specialise
        compiled = pc.compile(kernel, sched, **opts)
    except PolycError as e:
        return fail("refused", "compile", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001
        return fail("crash", "compile", _trace(e))
    eps = tolerance_eps(case.kernel)
    bounds = dict(case.kernel.bounds)
    for draw, sizes in enumerate(case.sizes):
        try:
            args = case_inputs(case, kernel, sizes, draw)
        except ValueError as e:
            return fail("refused", "inputs", str(e))
        mine, theirs = _copy(args), _copy(args)
        try:
            with np.errstate(over="raise", invalid="ignore", divide="ignore", under="ignore"):
                oracle = kernel.reference if reference is None else reference(kernel)
                want = _written(kernel, oracle(**theirs), theirs)
        except (FloatingPointError, OverflowError) as e:   # numpy's overflow, or a too large int stored
            return fail("discarded", "reference", f"overflow in the reference ({e}) at sizes {sizes}")
        except ReferenceFailedError as e:     # Python refused a value (int(nan)): nothing to compare
            return fail("discarded", "reference", f"{e} (sizes {sizes})")
        except PolycError as e:
            return fail("refused", "reference", f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001
            return fail("crash", "reference", _trace(e))
        try:
            got = _written(kernel, compiled(**mine), mine)
        except PolycError as e:
            return fail("refused", "call", f"{type(e).__name__}: {e} (sizes {sizes})")
        except Exception as e:  # noqa: BLE001
            return fail("crash", "call", _trace(e))
        res.runs += 1
        problems = compare_outputs(got, want, eps, bounds, args)
        if problems:
            res.failed_sizes = dict(sizes)
            res.only_nan_lost = only_nan_lost(got, want)
            if _beyond_bounds(want, bounds):
                return fail("discarded", "bounds", f"sizes {sizes}: a reference value exceeds the magnitude the "
                            "generator allowed (the identity of an empty integer max/min reduction taken into "
                            "arithmetic, where C's overflow is undefined): " + "; ".join(problems))
            return fail("mismatch", "compare", f"sizes {sizes}: " + "; ".join(problems))
    return res


def _beyond_bounds(want: Dict[str, np.ndarray], bounds: Dict[str, float]) -> bool:
    """Whether a finite reference value of an Einstein kernel exceeds its static magnitude bound:
    only an empty integer `max=!`/`min=!` (identity INT_MIN/INT_MAX) can do that, and integer
    arithmetic on it overflows, which C leaves undefined: such a case proves nothing."""
    for name, w in want.items():
        if name in bounds and w.size:
            finite = w[np.isfinite(w)] if w.dtype.kind == "f" else w
            if finite.size and float(np.abs(finite.astype(np.float64)).max()) > bounds[name] * (1 + 1e-6) + 1:
                return True
    return False


def _trace(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)[-3:]
    where = " <- ".join(f"{f.filename.split('polyc/')[-1]}:{f.lineno}" for f in reversed(tb))
    return f"{type(e).__name__}: {e} [{where}]"
