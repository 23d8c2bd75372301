"""Targets read from text: a short description (`"c l2=256K cores=8 -avx512f"`, `"cuda:sm_80"`), a
dict, or the JSON `Target.to_json` wrote.  Everything read here is untrusted input: every field is
checked (`target._validate`, through the Target itself), and a Target read from a file becomes a
command line polyc runs, so its compiler and flags must also pass
`compile_flags.saved_command_problem`.  `Target.from_description`, `from_dict` and `from_json`
call these functions, handing over the class, so this module needs nothing of `polyc.target` (a
leaf it imports: the field checks both share live here).
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Dict, Mapping, Sequence, Tuple, Union

from .compile_flags import normalise_flags, saved_command_problem
from .errors import CompileFlagsError, TargetError

#: A plain name: an ISA, a feature.
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}\Z")


def check_word(value: Any, field: str) -> None:
    if not isinstance(value, str) or not WORD.match(value):
        raise TargetError(f"{field}: {value!r} is not a plain name (letters, digits, '_.:+-', at most 64)", field)


def target_flags(value: Any) -> Tuple[str, ...]:
    """A Target's flags as a tuple (a string split like a shell would), checked as any flags."""
    try:
        return normalise_flags(value, "the target's flags") or ()
    except CompileFlagsError as e:
        raise TargetError(str(e), "flags") from None


def _fields(cls: Any) -> Tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def target_from_description(cls: Any, kinds: Sequence[str], description: Union[str, Mapping[str, Any]]) -> Any:
    """A Target from a short description, starting from the kind's default and changing the
    fields given.  A string: the kind ("c", "host", "cuda", "cuda:sm_80", "cuda-emu"), then
    `field=value` items (sizes may end in K, M or G) and `+feature` / `-feature`, separated by
    spaces or commas: `"c l2=256K vector_bytes=32 cores=8 -avx512f"`.  A dict: `kind` plus any
    fields, as in `to_dict` (missing ones from the kind's default)."""
    if isinstance(description, Mapping):
        return _from_partial_dict(cls, kinds, dict(description))
    if not isinstance(description, str):
        raise TargetError(f"a target description is a string or a dict, not {type(description).__name__}",
                          "description")
    if len(description) > 4096:
        raise TargetError("the target description is longer than 4096 characters", "description")
    parts = [p for p in re.split(r"[\s,]+", description.strip()) if p]
    if not parts:
        raise TargetError("the target description is empty", "kind")
    head, rest = parts[0], parts[1:]
    arch = None
    if head.startswith("cuda:"):
        head, arch = "cuda", head[len("cuda:"):]
    base = cls.for_kind(head if head != "host" else "c", arch)
    described = frozenset(_fields(cls)) - {"kind", "features"}     # `kind` heads it; features are +f/-f
    changes: Dict[str, Any] = {}
    features = set(base.features)
    for part in rest:
        if part[0] in "+-" and "=" not in part:
            check_word(part[1:], "features")
            (features.add if part[0] == "+" else features.discard)(part[1:])
            continue
        field, eq, value = part.partition("=")
        if not eq or field not in described:
            raise TargetError(f"{part!r} is not `field=value` with a field among "
                              f"{', '.join(sorted(described))}, nor `+feature` / `-feature`", field)
        changes[field] = _description_value(field, value)
    return base.with_(features=frozenset(features), **changes)


def target_from_dict(cls: Any, data: Any) -> Any:
    """The Target `to_dict` wrote; every field required and checked, the compiler and flags as
    for a command line from a file."""
    if not isinstance(data, dict):
        raise TargetError(f"a saved target is a JSON object, not {type(data).__name__}", "target")
    fields = _fields(cls)
    _refuse_unknown_fields(data, fields)
    missing = [f for f in fields if f not in data]
    if missing:
        raise TargetError(f"field {missing[0]!r} is missing", missing[0])
    t = cls(**{f: _loaded(f, data[f]) for f in fields})
    problem = saved_command_problem(t.compiler, t.flags)
    if problem is not None:
        raise TargetError(problem[1], problem[0])
    return t


def target_from_json(cls: Any, text: Union[str, bytes]) -> Any:
    """The Target `to_json` wrote (a TargetError for anything malformed)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TargetError(f"not UTF-8 text ({e})", "target") from None
    if not isinstance(text, str):
        raise TargetError(f"from_json takes JSON text, not {type(text).__name__}", "target")
    if len(text) > 1 << 16:
        raise TargetError("the saved target is longer than 64 KiB", "target")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise TargetError(f"not valid JSON ({e})", "target") from None
    return target_from_dict(cls, data)


def _refuse_unknown_fields(data: Mapping[Any, Any], fields: Sequence[str]) -> None:
    unknown = sorted(set(data) - set(fields), key=str)
    if unknown:
        raise TargetError(f"unknown field {unknown[0]!r}", str(unknown[0])[:64])


def _loaded(field: str, value: Any) -> Any:
    """A JSON value converted to the field's type (lists to tuples/sets), types checked later."""
    if field == "flags":
        if not isinstance(value, list):
            raise TargetError(f"flags must be a list of strings, not {type(value).__name__}", "flags")
        return tuple(value)
    if field == "features":
        if not isinstance(value, list):
            raise TargetError(f"features must be a list of names, not {type(value).__name__}", "features")
        for f in value:
            check_word(f, "features")
        return frozenset(value)
    return value


def _from_partial_dict(cls: Any, kinds: Sequence[str], data: Dict[str, Any]) -> Any:
    kind = data.pop("kind", "c")
    if not isinstance(kind, str) or kind not in kinds:
        raise TargetError(f"kind must be one of {', '.join(kinds)}, not {kind!r}", "kind")
    _refuse_unknown_fields(data, _fields(cls))
    base = cls.for_kind(kind, data.get("cuda_arch"))
    return base.with_(**{f: _loaded(f, v) for f, v in data.items()})


def _description_value(field: str, text: str) -> Any:
    if field == "flags":
        return target_flags(text.replace(";", " "))
    if field in ("isa", "compiler"):
        return text
    if field == "cuda_arch":
        return None if text in ("", "none") else text
    m = re.fullmatch(r"([0-9]{1,15})([KMG]?)(?:i?B)?", text, re.IGNORECASE)
    if not m:
        raise TargetError(f"{field}={text!r}: expected an integer, optionally with K, M or G", field)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
