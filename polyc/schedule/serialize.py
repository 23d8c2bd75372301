"""Saving and restoring schedules.

`to_json` stores the *history of primitive calls* (name, positional and keyword arguments) plus,
for reading only, the resulting loop names and statement maps.  `from_json` replays the calls on
the source-order schedule of the same kernel, in this or a later process, so every step is
re-proved legal against the kernel's dependences (a kernel that changed meanwhile gets a clear
error instead of a silently wrong schedule); the replayed maps are then compared with the stored
ones.  `to_text` is the human-readable form: the call chain as Python, then the loop outline.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Union

import islpy as isl

from ..errors import PolycError
from ..poly.model import PolyModel
from .schedule import Dim, Schedule

FORMAT = "polyc-schedule"
VERSION = 1

#: Primitives a stored schedule may call (exactly the Schedule methods of that name).
REPLAYABLE = ("tile", "split", "interchange", "reorder", "skew", "reverse", "shift", "fuse",
              "distribute", "peel", "unroll", "unroll_and_jam", "parallel", "parallel_reduction",
              "vectorize", "map_to_blocks", "map_to_threads", "pack")


def replayable(s: Schedule) -> bool:
    """Whether every step of `s` was a recorded primitive call (else it is saved as raw maps)."""
    return len(s.steps) == len(s.history)


def _dim_dict(d: Dim) -> dict:
    return {"name": d.name, "marks": sorted(d.marks), "unroll": d.unroll, "origin": d.origin}


def to_json(s: Schedule, indent: int = 2) -> str:
    """The schedule as JSON: kernel name, statements, primitive calls, resulting loops and maps.

    A schedule built partly without the primitives (e.g. by an automatic scheduler writing maps
    directly) has no replayable history; it is saved as its maps and dimensions instead, which
    `from_json` re-proves as a whole.
    """
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "kernel": s.model.program.name,
        "statements": [name for name, _ in s.maps],
        "replayable": replayable(s),
        "steps": [st.to_dict() for st in s.steps] if replayable(s) else [],  # type: ignore[attr-defined]
        "history": list(s.history),
        "loops": list(s.loop_names),
        "dims": [_dim_dict(d) for d in s.dims],
        "maps": {name: text for name, text in s.maps},
    }
    return json.dumps(doc, indent=indent)


def _restore_raw(model: PolyModel, doc: dict) -> Schedule:
    """A schedule from stored maps and dims, re-proved legal (no primitive history to replay)."""
    from .rewrite import validate
    try:
        dims = tuple(Dim(d["name"], frozenset(d.get("marks", ())), int(d.get("unroll", 0)), d.get("origin"))
                     for d in doc["dims"])
        maps = tuple((name, str(isl.Map(doc["maps"][name]))) for name in doc["statements"])
    except (KeyError, TypeError, ValueError, isl.Error) as e:
        raise PolycError(f"the saved schedule is incomplete or damaged ({e})") from e
    history = tuple(doc.get("history", ())) or ("restored",)
    s = Schedule(model, maps, dims, history=history)
    from .rewrite import with_options
    s = replace(s, options=with_options((), dims))
    validate(s, "the saved schedule")
    return s


def _model_of(kernel_or_model: Any) -> PolyModel:
    model = getattr(kernel_or_model, "model", kernel_or_model)
    if not isinstance(model, PolyModel):
        raise PolycError(f"from_json needs the kernel (or its model), not {type(kernel_or_model).__name__}")
    return model


def from_json(kernel_or_model: Any, text: Union[str, bytes]) -> Schedule:
    """Replay the primitive calls stored by `to_json` on this kernel (each re-proved legal)."""
    model = _model_of(kernel_or_model)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise PolycError(f"not a saved schedule (invalid JSON: {e})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PolycError("not a saved polyc schedule (no 'format': 'polyc-schedule')")
    if doc.get("version") != VERSION:
        raise PolycError(f"saved schedule version {doc.get('version')} is not supported "
                         f"(this polyc reads version {VERSION})")
    s = Schedule.source_order(model)
    names = [name for name, _ in s.maps]
    if doc.get("statements") != names:
        raise PolycError(f"the saved schedule is for statements {doc.get('statements')} of kernel "
                         f"{doc.get('kernel')!r}; this kernel ({model.program.name!r}) has {names}")
    if doc.get("replayable") is False:
        return _restore_raw(model, doc)
    for k, entry in enumerate(doc.get("steps", [])):
        name = entry.get("primitive")
        if name not in REPLAYABLE:
            raise PolycError(f"step {k + 1} of the saved schedule calls unknown primitive {name!r}")
        args = entry.get("args", [])
        kwargs = entry.get("kwargs", {})
        try:
            s = getattr(s, name)(*args, **kwargs)
        except PolycError as e:
            raise type(e)(f"replaying step {k + 1} of the saved schedule failed: {e}") from e
        except TypeError as e:
            raise PolycError(f"step {k + 1} of the saved schedule has bad arguments for {name}: {e}") from e
    stored = doc.get("maps")
    if stored:
        for name, text in s.maps:
            if name in stored and not isl.Map(stored[name]).is_equal(isl.Map(text)):
                raise PolycError(f"replaying the saved schedule gives statement {name} a different schedule "
                                 f"than was saved ({text} instead of {stored[name]}); the kernel changed")
    return s


def to_text(s: Schedule) -> str:
    """The primitive chain as Python source, then the loop outline."""
    from .outline import chain_text, tree_text
    return chain_text(s) + "\n\n" + tree_text(s)
