"""Schedule fuzzing: random primitive sequences, each step proven legal or refused, every accepted
schedule compiled and compared with the reference.

This tests the legality checker from the side that matters: a schedule it accepts must compute
the same values as the kernel as written.  (A refused schedule may or may not be wrong for the
particular inputs; refusals are counted, not executed.)  Each accepted schedule also goes through
`to_json`/`from_json` and must come back identical.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import IllegalScheduleError, IslBudgetError, PolycError

#: Primitives the fuzzer draws from, with relative weights.
PRIMITIVES: Dict[str, int] = {
    "tile": 3, "split": 2, "interchange": 3, "reorder": 1, "skew": 2, "reverse": 2, "shift": 2,
    "fuse": 2, "distribute": 2, "peel": 1, "index_split": 1, "unroll": 1, "unroll_and_jam": 1, "parallel": 3,
    "vectorize": 2,
}
#: Drawn besides on the C target: packing a contraction (refused on anything else).
C_PRIMITIVES: Dict[str, int] = {"pack": 1}
#: Drawn besides on the CUDA targets: loops mapped to blocks and threads (`target="cuda-emu"`).
GPU_PRIMITIVES: Dict[str, int] = {"map_to_blocks": 3, "map_to_threads": 3}

Call = Tuple[str, Tuple[Any, ...], Dict[str, Any]]


@dataclass
class FuzzSummary:
    """Counts of one fuzzing run.

    - `tried`: primitive applications attempted; `legal`: accepted (proven legal);
      `illegal`: refused with IllegalScheduleError; `invalid`: refused for another reason (e.g.
      full unroll of a loop whose trip count grows with the sizes); `budget`: stopped by the isl budget;
    - `schedules`: accepted schedules compiled and compared; `mismatches`: those that differed.
    """

    kernel: str
    tried: int = 0
    legal: int = 0
    illegal: int = 0
    invalid: int = 0
    budget: int = 0
    schedules: int = 0
    mismatches: int = 0
    failures: List[str] = field(default_factory=list)

    def __iadd__(self, other: "FuzzSummary") -> "FuzzSummary":
        for name in ("tried", "legal", "illegal", "invalid", "budget", "schedules", "mismatches"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)
        return self

    def __str__(self) -> str:
        return (f"{self.kernel}: {self.tried} primitive calls, {self.legal} legal, {self.illegal} illegal, "
                f"{self.invalid} invalid, {self.budget} over budget; {self.schedules} schedules run, "
                f"{self.mismatches} mismatches")


def random_call(schedule, rng: random.Random, primitives: Optional[Mapping[str, int]] = None) -> Call:
    """One random primitive call (name, args, kwargs) over the loops and statements of `schedule`."""
    weights = dict(primitives or PRIMITIVES)
    loops = list(schedule.loop_names)
    statements = [name for name, _ in schedule.maps]
    if len(statements) < 2:
        weights.pop("fuse", None)
    if len(loops) < 2:
        for name in ("interchange", "reorder", "skew"):
            weights.pop(name, None)
    if not loops:
        return ("fuse", tuple(statements[:2]), {}) if len(statements) > 1 else ("reverse", ("?",), {})
    names = list(weights)
    name = rng.choices(names, weights=[weights[n] for n in names])[0]
    loop = rng.choice(loops)
    if name == "tile":
        chosen = rng.sample(loops, k=min(len(loops), rng.choice([1, 2, 2, 3])))
        return name, (), {l: rng.choice([2, 3, 4, 8]) for l in chosen}
    if name == "split":
        return name, (loop, rng.choice([2, 3, 4])), {}
    if name == "interchange":
        a, b = rng.sample(loops, 2)
        return name, (a, b), {}
    if name == "reorder":
        return name, tuple(rng.sample(loops, k=min(len(loops), 3))), {}
    if name == "skew":
        a, b = rng.sample(loops, 2)
        return name, (a, b, rng.choice([1, 1, 2, -1])), {}
    if name == "reverse":
        return name, (loop,), {}
    if name == "shift":
        return name, (rng.choice(statements), loop, rng.choice([-2, -1, 1, 2])), {}
    if name == "fuse":
        return name, tuple(rng.sample(statements, 2)), {}
    if name == "distribute":
        return name, (rng.choice([loop, rng.choice(statements)]),), {}
    if name == "peel":
        return name, (loop,), {"front": rng.choice([0, 1, 2]), "back": rng.choice([0, 1])}
    if name == "index_split":
        outer = [l for l in loops if schedule.dim_index(l) < schedule.dim_index(loop)]
        return name, (loop,), {"at": rng.choice(outer or loops), "offset": rng.choice([-1, 0, 0, 1])}
    if name == "unroll":
        inner = [l for l in loops if l.endswith("_inner")]
        if inner and rng.random() < 0.5:
            return name, (rng.choice(inner),), {}
        return name, (loop,), {"factor": rng.choice([2, 4])}
    if name == "unroll_and_jam":
        return name, (loop, rng.choice([2, 3])), {}
    if name == "parallel":
        return name, (loop,), ({"reduction": True} if rng.random() < 0.3 else {})
    if name == "pack":
        blocking = rng.choice([{}, {"mr": rng.choice([2, 3, 4])}, {"nv": 1, "kc": rng.choice([3, 8])}])
        return name, (rng.choice(statements),), blocking
    if name in ("map_to_blocks", "map_to_threads"):
        return name, tuple(rng.sample(loops, k=min(len(loops), rng.choice([1, 1, 2])))), {}
    return name, (loop,), {}


def call_text(call: Call) -> str:
    name, args, kwargs = call
    return f"{name}({', '.join([repr(a) for a in args] + [f'{k}={v!r}' for k, v in kwargs.items()])})"


def fuzz_schedules(kernel, n: int = 20, seed: int = 0, sizes: Optional[Mapping[str, int]] = None,
                   max_steps: int = 4, *, inputs: Optional[Mapping[str, Any]] = None,
                   reference: Optional[Callable[..., Any]] = None, dtype: str = "f64",
                   rtol: Optional[float] = None, atol: Optional[float] = None,
                   primitives: Optional[Mapping[str, int]] = None, roundtrip: bool = True,
                   raise_on_mismatch: bool = True, flags: Optional[Sequence[str]] = None,
                   target: str = "c") -> FuzzSummary:
    """Apply `n` random sequences of 1..`max_steps` primitives to `kernel`'s source-order schedule.

    `target` is where the schedules run (`"c"`, or `"cuda-emu"` to fuzz the CUDA mapping: block
    and thread mappings are drawn too, and `pack` on the C target); `primitives` overrides the
    weights.

    Refused steps are counted and skipped (the sequence continues from the last accepted
    schedule); the final schedule of each sequence, when it differs from source order, is run
    with `check_kernel` (and round-tripped through JSON).  Raises AssertionError listing the
    failing call chains if any accepted schedule computes something else than the reference.
    `dtype` is the element type of random inputs; tolerances follow the arrays compared (an f32
    kernel fed f32 `inputs=` is judged with f32 tolerances, see `check.tolerances_for`).
    """
    from ..schedule import Schedule
    from .check import as_kernel, check_kernel, random_inputs

    kernel = as_kernel(kernel)
    rng = random.Random(seed)
    summary = FuzzSummary(kernel.name)
    args = dict(inputs) if inputs is not None else random_inputs(kernel, sizes, dtype, seed)
    if primitives is None:
        primitives = {**PRIMITIVES, **(GPU_PRIMITIVES if target.startswith("cuda") else C_PRIMITIVES)}
    for _ in range(n):
        s = kernel.schedule()
        chain: List[str] = []
        for _ in range(rng.randint(1, max_steps)):
            call = random_call(s, rng, primitives)
            summary.tried += 1
            try:
                s = getattr(s, call[0])(*call[1], **call[2])
            except IllegalScheduleError:
                summary.illegal += 1
                continue
            except IslBudgetError:
                summary.budget += 1
                continue
            except PolycError:
                summary.invalid += 1
                continue
            summary.legal += 1
            chain.append(call_text(call))
        if not chain:
            continue
        summary.schedules += 1
        text = ".".join(["schedule()"] + chain)
        try:
            if roundtrip:
                back = Schedule.from_json(kernel, s.to_json())
                if back.maps != s.maps or back.dims != s.dims:
                    raise AssertionError(f"to_json/from_json changed the schedule {text}")
            check_kernel(kernel, s, inputs=args, reference=reference, dtype=dtype, rtol=rtol, atol=atol,
                         flags=flags, target=target)
        except (AssertionError, PolycError) as e:
            summary.mismatches += 1
            summary.failures.append(f"{kernel.name}.{text}: {e}")
    if summary.mismatches and raise_on_mismatch:
        raise AssertionError(f"{summary}\n" + "\n".join(summary.failures))
    return summary
