"""The tuner's one window onto the primitive registry and the Target.

The tuner never names a Schedule method or reads the machine directly: it asks this module which
primitives exist, what kinds their parameters have, how to apply one, and what the target
machine looks like.  When `polyc.schedule.registry` and `polyc.target` are present they are used
as they are; until then an equivalent view is built from today's `Schedule` methods and
`polyc.schedule.auto_cost.machine()` (the fallback below; delete it once both modules exist).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Mapping, Tuple

REQUIRED = object()


@dataclass(frozen=True)
class ParamView:
    """A primitive parameter: `kind` is one of the registry's kinds ("loop", "loop_sizes", ...)."""

    name: str
    kind: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class PrimitiveView:
    name: str
    params: Tuple[ParamView, ...]
    apply: Callable[..., Any]


@dataclass(frozen=True)
class TargetView:
    """The machine facts the tuner reads (the decision-relevant fields of `polyc.target.Target`)."""

    kind: str
    vector_bytes: int
    l1: int
    l2: int
    l3: int
    cores: int
    features: FrozenSet[str] = field(default_factory=frozenset)

    def fingerprint(self) -> str:
        doc = {"kind": self.kind, "vector_bytes": self.vector_bytes, "l1": self.l1, "l2": self.l2,
               "l3": self.l3, "cores": self.cores, "features": sorted(self.features)}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _method(name: str) -> Callable[..., Any]:
    return lambda schedule, *args, **kwargs: getattr(schedule, name)(*args, **kwargs)


def _p(name: str, kind: str, default: Any = REQUIRED) -> ParamView:
    return ParamView(name, kind, default)


# Fallback: the parameters of today's Schedule methods, in the registry's kinds.
_FALLBACK: Dict[str, Tuple[ParamView, ...]] = {
    "tile": (_p("sizes", "loop_sizes"),),
    "split": (_p("loop", "loop"), _p("factor", "positive_int")),
    "interchange": (_p("a", "loop"), _p("b", "loop")),
    "reorder": (_p("loops", "loops"),),
    "skew": (_p("loop", "loop"), _p("by_loop", "loop"), _p("factor", "int", 1)),
    "unroll": (_p("loop", "loop"), _p("factor", "optional_int", None)),
    "unroll_and_jam": (_p("loop", "loop"), _p("factor", "positive_int"), _p("separate", "bool", False)),
    "parallel": (_p("loop", "loop"), _p("reduction", "bool", False)),
    "vectorize": (_p("loop", "loop"), _p("reduction", "bool", False)),
    "pack": (_p("statement", "statement"), _p("mr", "optional_int", None), _p("nv", "optional_int", None),
             _p("kc", "optional_int", None), _p("mc", "optional_int", None), _p("nc", "optional_int", None)),
    "fuse": (_p("statements", "statements"), _p("loop", "optional_loop", None)),
    "distribute": (_p("target", "name"), _p("loop", "optional_loop", None)),
    "map_to_blocks": (_p("loops", "loops"),),
    "map_to_threads": (_p("loops", "loops"),),
}


def primitives() -> Mapping[str, PrimitiveView]:
    """Every primitive the tuner may use, by name."""
    try:
        from ..schedule.registry import PRIMITIVES, REQUIRED as REGISTRY_REQUIRED  # type: ignore[import-not-found]
    except ImportError:
        return {n: PrimitiveView(n, ps, _method(n)) for n, ps in _FALLBACK.items()}
    return {n: PrimitiveView(n, tuple(ParamView(q.name, q.kind, REQUIRED if q.default is REGISTRY_REQUIRED
                                                else q.default) for q in p.params), p.apply)
            for n, p in PRIMITIVES.items()}


def apply_step(schedule: Any, name: str, args: Tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """`schedule` with primitive `name` applied (proven legal by the primitive, or it raises)."""
    prims = primitives()
    if name not in prims:
        from ..errors import TuneRecordError
        raise TuneRecordError(f"unknown primitive {name!r}", "steps")
    return prims[name].apply(schedule, *args, **dict(kwargs))


def target_view(target: Any = None) -> TargetView:
    """The machine facts of `target` (a `polyc.target.Target`, "c", or None for this host)."""
    if target is not None and not isinstance(target, str):
        return TargetView(getattr(target, "kind", "c"), int(target.vector_bytes), int(target.l1), int(target.l2),
                          int(target.l3), int(target.cores), frozenset(getattr(target, "features", ())))
    kind = target or "c"
    try:
        from ..target import Target  # type: ignore[import-not-found]
    except ImportError:
        from ..schedule.auto_cost import machine
        from ..schedule.packing import vector_bytes
        m = machine()
        return TargetView(kind, vector_bytes(), m.l1, m.l2, m.l3, m.cores)
    t = Target.host() if kind == "c" else (Target.cuda_emu() if kind == "cuda-emu" else Target.cuda("sm_90"))
    return target_view(t)


def auto_schedule_view(kernel: Any, target: Any, **knobs: Any) -> Any:
    """`schedule="auto"` for `target` with `knobs`, without the wall-clock deadline (so one genome
    always gives the same schedule).  Today's `auto_schedule` takes the target kind string."""
    from ..schedule.auto import auto_schedule
    kind = getattr(target, "kind", target) or "c"
    return auto_schedule(kernel, kind, deadline=0, **knobs)
