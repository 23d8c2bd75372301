"""What a schedule primitive declares about itself: `Param` and `Primitive` (collected by `registry`).

A primitive's `Param`s say what each argument is in terms a tuner can enumerate and a file reader
can check: a loop of the schedule, several loops, a statement, loop sizes, an integer in a range,
a flag, a new loop name.  `check_arguments` validates a call (from a saved file: untrusted) against
them before `apply` runs.

Parameter kinds:

- "loop" / "optional_loop": a loop name of the schedule (or None); "loops": one or more of them;
- "statement" / "statements": statements by name or position;
- "loop_sizes": a mapping loop name -> positive int (tile sizes);
- "int", "positive_int", "optional_int": integers within [minimum, maximum] (optional: or None);
- "bool": True or False; "name": a new loop name (an identifier), or None for the default;
- "target": a `polyc.Target` whose machine facts give the defaults of other parameters (None: the
  host).  The recorded step holds the values it resolved, so a Target is never saved in a file:
  a file that names one is refused, and a tuner leaves it to the Target it tunes for.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ..errors import ScheduleArgumentError
from .integers import MAX_SCHEDULE_INT

KINDS = ("loop", "loops", "statement", "statements", "loop_sizes", "int", "positive_int", "bool", "name",
         "optional_int", "optional_loop", "target", "tensor")

#: The targets a primitive's result means something for.
ALL_TARGETS = frozenset({"c", "cuda", "cuda-emu"})


class _Required:
    """The default of a parameter that has none."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Param:
    """One argument of a primitive: its name (as in `apply`'s signature), kind (see the module
    docstring), what it means, its default (`REQUIRED` when it has none) and, for integers, the
    range a tuner may draw from and a file must respect."""

    name: str
    kind: str
    doc: str
    default: Any = REQUIRED
    minimum: Optional[int] = None
    maximum: Optional[int] = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown parameter kind {self.kind!r}; kinds are {', '.join(KINDS)}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def bounds(self) -> Tuple[int, int]:
        """The integer range [lo, hi] of an integer parameter."""
        lo = 1 if self.kind == "positive_int" else -MAX_SCHEDULE_INT
        return (lo if self.minimum is None else self.minimum,
                MAX_SCHEDULE_INT if self.maximum is None else self.maximum)


@dataclass(frozen=True)
class Primitive:
    """A schedule primitive: `apply(schedule, *args, **kwargs)` returns the new, proven Schedule.

    `obligations`: what is proven before `apply` returns (the legality conditions); `targets`: the
    code generators its result matters to (`pack` only for C, `map_to_blocks` only for CUDA)."""

    name: str
    params: Tuple[Param, ...]
    apply: Callable[..., Any]
    doc: str
    obligations: Tuple[str, ...]
    targets: FrozenSet[str] = ALL_TARGETS

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_name(v: Any) -> bool:
    return isinstance(v, str) and v.isidentifier()


def _problem(p: Param, value: Any) -> Optional[str]:
    """Why `value` is no valid argument for `p`, or None."""
    if value is None and (p.kind.startswith("optional") or p.default is None):
        return None
    kind = p.kind
    if kind in ("loop", "optional_loop", "name"):
        return None if _is_name(value) else f"must be a loop name, not {value!r}"
    if kind == "tensor":
        return None if _is_name(value) else f"must be a tensor name, not {value!r}"
    if kind == "statement":
        return None if _is_int(value) or _is_name(value) else f"must be a statement name or position, not {value!r}"
    if kind in ("loops", "statements"):   # a list passed as one argument (`statements=["S1"]`)
        if not isinstance(value, (list, tuple)) or not value:
            return f"must be a non-empty list, not {value!r}"
        single = Param(p.name, kind[:-1], p.doc)
        for v in value:
            problem = _problem(single, v)
            if problem:
                return problem
        return None
    if kind == "bool":
        return None if isinstance(value, bool) else f"must be true or false, not {value!r}"
    if kind in ("int", "positive_int", "optional_int"):
        lo, hi = p.bounds
        if not _is_int(value):
            return f"must be an integer, not {value!r}"
        return None if lo <= value <= hi else f"must be between {lo} and {hi}, not {value}"
    if kind == "target":
        return "names a machine (a polyc.Target), which saved schedules never hold: the step records the " \
               "values it resolved"
    if kind == "loop_sizes":
        if not isinstance(value, Mapping):
            return f"must map loop names to sizes, not {value!r}"
        for loop, size in value.items():
            if not _is_name(loop):
                return f"has {loop!r}, which is no loop name"
            if not _is_int(size) or not 1 <= size <= MAX_SCHEDULE_INT:
                return f"gives loop {loop!r} the size {size!r}; sizes are positive integers"
        return None
    raise AssertionError(kind)


def check_arguments(prim: Primitive, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Validate a call `prim(schedule, *args, **kwargs)` against `prim.params`; raises
    `ScheduleArgumentError` whose `.argument` is where in the call (`args[1]`, `kwargs.factor`)."""
    signature = inspect.signature(prim.apply)
    takes_any = any(q.kind == inspect.Parameter.VAR_KEYWORD for q in signature.parameters.values())
    named = {q.name for q in signature.parameters.values()
             if q.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    for key in kwargs:
        if not takes_any and key not in named:
            raise ScheduleArgumentError(f"{prim.name} takes no argument {key!r} (its parameters: "
                                        f"{', '.join(p.name for p in prim.params)})", f"kwargs.{key}")
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError as e:
        raise ScheduleArgumentError(f"{prim.name} cannot be called with these arguments ({e})", "args") from None
    places = _places(prim, len(args), kwargs)
    for name, value in list(bound.arguments.items())[1:]:
        p = prim.param(name)
        pk = signature.parameters[name].kind
        if pk == inspect.Parameter.VAR_POSITIONAL:
            items: List[Tuple[Any, str]] = list(zip(value, places.get(name, [])))
            if p.kind in ("loops", "statements") and not value:
                raise ScheduleArgumentError(f"{prim.name} needs at least one {p.kind[:-1]}", "args")
            single = Param(p.name, p.kind[:-1] if p.kind in ("loops", "statements") else p.kind, p.doc)
            for v, where in items:
                problem = _problem(single, v)
                if problem:
                    raise ScheduleArgumentError(f"{prim.name}'s {p.name} {problem}", where)
            continue
        if pk == inspect.Parameter.VAR_KEYWORD:
            for key, v in value.items():
                problem = _problem(p, {key: v})
                if problem:
                    raise ScheduleArgumentError(f"{prim.name}'s {p.name} {problem}", f"kwargs.{key}")
            continue
        problem = _problem(p, value)
        if problem:
            raise ScheduleArgumentError(f"{prim.name}'s {p.name} {problem}", places.get(name, ["args"])[0])


def _places(prim: Primitive, n_args: int, kwargs: Mapping[str, Any]) -> Dict[str, List[str]]:
    """Where each parameter's value sits in the call (for error messages that point into a file)."""
    out: Dict[str, List[str]] = {}
    params = list(inspect.signature(prim.apply).parameters.values())[1:]
    j = 0
    for param in params:
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            out[param.name] = [f"args[{k}]" for k in range(j, n_args)]
            j = n_args
        elif param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) and j < n_args:
            out[param.name] = [f"args[{j}]"]
            j += 1
    for key in kwargs:
        out.setdefault(key, [f"kwargs.{key}"])
    return out
