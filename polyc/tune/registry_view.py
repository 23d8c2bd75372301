"""The tuner's one window onto the primitive registry and the Target.

The tuner never names a Schedule method or reads the machine directly: it asks this module which
primitives exist, what kinds their parameters have, how to apply one, and what the target
machine looks like: the primitive registry (`polyc.schedule.registry`) and the `polyc.Target`.
"""
from __future__ import annotations

from typing import Any, Mapping, Tuple


def primitives() -> Mapping[str, Any]:
    """Every primitive the tuner may use, by name: `polyc.schedule.registry.PRIMITIVES` (each with
    `params` of typed kinds and `apply`)."""
    from ..schedule.registry import PRIMITIVES
    return PRIMITIVES


def apply_step(schedule: Any, name: str, args: Tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """`schedule` with primitive `name` applied (proven legal by the primitive, or it raises); the
    arguments are checked against the primitive's parameters first (a record is untrusted input:
    a step with arguments the primitive does not take is a TuneRecordError, not a TypeError)."""
    from ..errors import ScheduleArgumentError, TuneRecordError
    from ..schedule.registry import check_arguments
    prims = primitives()
    if name not in prims:
        raise TuneRecordError(f"unknown primitive {name!r}", "steps")
    try:
        check_arguments(prims[name], args, kwargs)
    except ScheduleArgumentError as e:
        raise TuneRecordError(f"bad arguments for {name}: {e}", "steps") from e
    return prims[name].apply(schedule, *args, **dict(kwargs))


def target_view(target: Any = None) -> Any:
    """The `polyc.Target` meant by `target` (a Target, a kind string, a description; None: the host)."""
    from ..target import Target
    return Target.resolve("c" if target is None else target)


def auto_schedule_view(kernel: Any, target: Any, **knobs: Any) -> Any:
    """`schedule="auto"` for `target` with `knobs`, without the wall-clock deadline (so one genome
    always gives the same schedule)."""
    from ..schedule.auto import auto_schedule
    return auto_schedule(kernel, target_view(target), deadline=0, **knobs)
