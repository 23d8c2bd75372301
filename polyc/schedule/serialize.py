"""Saving and restoring schedules.

`to_json` stores the *history of primitive calls* (name, positional and keyword arguments) plus,
for reading only, the resulting loop names and statement maps.  `from_json` replays the calls on
the source-order schedule of the same kernel, in this or a later process, so every step is
re-proved legal against the kernel's dependences (a kernel that changed meanwhile gets a clear
error instead of a silently wrong schedule); the replayed maps are then compared with the stored
ones.  `to_text` is the human-readable form: the call chain as Python, then the loop outline.

A file is untrusted input: `schedule_file` checks its shape and every name in it before use, and
proves the stored maps of a schedule without a replayable history; every malformed or tampered
file raises `ScheduleFileError` saying where.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Union

import islpy as isl

from ..errors import IllegalScheduleError, PolycError, ScheduleArgumentError, ScheduleFileError
from ..poly.islutil import isl_budget
from ..poly.model import PolyModel
from . import saved_auto, schedule_file
from .outline import chain_text, tree_text
from .registry import ALIASES, PRIMITIVES, apply_checked
from .state import Dim, ScheduleState as Schedule

FORMAT = "polyc-schedule"
VERSION = 1

#: Re-derivers of an automatic schedule's typed fields, registered by the modules that make them
#: (`auto`: "auto_request", `auto_gpu`: "gpu_contractions"; imported by `polyc`): (start, restored
#: raw schedule, checked saved value, saved dims) -> the re-derived schedule or None.
REDERIVERS: Dict[str, Callable[..., Optional[Schedule]]] = {}

#: Primitives a stored schedule may call: the registry's (and their aliases).
REPLAYABLE = tuple(PRIMITIVES) + tuple(ALIASES)


def replayable(s: Schedule) -> bool:
    """Whether every step of `s` was a recorded primitive call (else it is saved as raw maps)."""
    return len(s.steps) == len(s.history)


def _dim_dict(d: Dim, packed: frozenset) -> dict:
    """A dimension in the saved form (the labels and unroll integer every version reads)."""
    labels = sorted(d.labels() + (("packed",) if d.name in packed else ()))
    return {"name": d.name, "marks": labels, "unroll": d.unroll.legacy(), "origin": d.origin}


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
        "statements": list(s.statements),
        "replayable": replayable(s),
        "steps": [st.to_dict() for st in s.steps] if replayable(s) else [],  # type: ignore[attr-defined]
        "history": list(s.history),
        "loops": list(s.loop_names),
        "dims": [_dim_dict(d, s.packed_loops()) for d in s.dims],
        "maps": dict(s.map_texts),
    }
    target = s.target
    if target is not None:   # the machine an automatic schedule was chosen for (`polyc.Target`)
        doc["target"] = target.to_dict()
    request = s.auto_request
    if request is not None and not replayable(s) and request.applies_to(s):  # type: ignore[attr-defined]
        # The knobs auto_schedule was called with: the loader re-derives (and re-proves) the
        # pack and CUDA contraction plans from them, and the runtime re-decides per size class.
        doc["auto_request"] = saved_auto.request_dict(request)
    if s.gpu_contractions and not replayable(s):
        doc["gpu_contractions"] = saved_auto.gpu_plans_list(s)   # re-derived and matched on load
    return json.dumps(doc, indent=indent)


def _restore_raw(start: Schedule, doc: dict) -> Schedule:
    """A schedule from stored maps and dims (no primitive history to replay), trusted only after
    `schedule_file` has checked every name and proven every map (each instance runs exactly once,
    for all sizes) and `validate` has re-proved dependence order and loop marks."""
    from .rewrite import validate
    model = start.model
    names = [st.name for st in model.program.statements]
    dims = schedule_file.check_dims(model, doc)
    history = schedule_file.check_history(doc) or ("restored",)
    maps = schedule_file.prove_maps(model, dims, schedule_file.map_texts(doc, names, required=True))
    s = replace(start, maps=maps, dims=dims, history=history, steps=(), packing=())
    try:
        validate(s, "the saved schedule")
    except IllegalScheduleError:
        raise
    except PolycError as e:
        raise ScheduleFileError(str(e), "maps") from e
    return s


def model_of(kernel_or_model: Any) -> PolyModel:
    """The PolyModel of a kernel (or the model itself); PolycError for anything else."""
    model = getattr(kernel_or_model, "model", kernel_or_model)
    if not isinstance(model, PolyModel):
        raise PolycError(f"from_json needs the kernel (or its model), not {type(kernel_or_model).__name__}")
    return model


#: Exceptions a primitive may raise on arguments of the wrong shape (reported as a damaged file).
_MALFORMED = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, RecursionError,
              isl.Error)


def _replay(start: Schedule, doc: dict) -> Schedule:
    """The source-order schedule `start` with the file's primitive calls applied, each validated
    against the primitive's parameters (`params.check_arguments`) and re-proved."""
    s = start
    for k, (name, args, kwargs) in enumerate(schedule_file.check_steps(start.model, doc, REPLAYABLE)):
        where = f"steps[{k}] ({name})"
        try:
            s = apply_checked(s, name, args, kwargs)
        except ScheduleArgumentError as e:
            # A place in the call (`args[1]`, `kwargs.factor`) from the Param check, else the step.
            if e.argument.startswith(("args", "kwargs")):
                raise ScheduleFileError(f"bad arguments for {name}: {e}", f"steps[{k}].{e.argument}") from e
            raise ScheduleFileError(f"replaying step {k + 1} failed: {e}", where) from e
        except IllegalScheduleError as e:
            raise IllegalScheduleError(f"replaying step {k + 1} of the saved schedule failed: {e}",
                                       dependence=e.dependence) from e
        except PolycError as e:
            raise ScheduleFileError(f"replaying step {k + 1} failed: {e}", where) from e
        except _MALFORMED as e:
            raise ScheduleFileError(f"bad arguments for {name}: {type(e).__name__}: {e}", where) from e
    names = list(s.statements)
    for name, text in schedule_file.map_texts(doc, names, required=False).items():
        stored = schedule_file.parse_map(text, f"maps.{name}")
        try:
            with isl_budget(f"comparing the saved map of {name}"):
                same = stored.is_equal(s.statement_map(name))
        except PolycError:
            same = False
        if not same:
            raise ScheduleFileError(f"replaying the saved schedule gives statement {name} a different schedule "
                                    f"than was saved ({s.map_texts[name]} instead of {text}); the kernel or "
                                    f"the file changed", f"maps.{name}")
    # The other fields describe what the steps make; a file whose fields say otherwise was edited.
    if "loops" in doc and doc["loops"] != list(s.loop_names):
        raise ScheduleFileError(f"the saved loops are not the ones its steps make ({list(s.loop_names)})", "loops")
    if "dims" in doc:
        made = [_dim_dict(d, s.packed_loops()) for d in s.dims]
        saved = doc["dims"]
        if not isinstance(saved, list) or len(saved) != len(made):
            raise ScheduleFileError(f"the saved dims are not the {len(made)} dimensions its steps make", "dims")
        for k, (was, now) in enumerate(zip(saved, made)):
            if was != now:
                raise ScheduleFileError(f"dimension {k} is not saved as the steps make it ({now})", f"dims[{k}]")
    return s


def from_json(start: Schedule, text: Union[str, bytes]) -> Schedule:
    """The schedule saved by `to_json`, for the kernel whose source-order schedule is `start`
    (the result has the class of `start`).

    The file is untrusted: a replayable one has its primitive calls replayed (each re-proved legal)
    and must reproduce its stored maps; a raw one (maps and dims only) has every name checked and
    every map proven to run each statement instance exactly once for all sizes, then its
    dependence order and loop marks re-proved (see `schedule_file`).  A malformed or tampered
    file raises `ScheduleFileError` naming the place; an illegal one `IllegalScheduleError`."""
    model = start.model
    doc = schedule_file.parse_document(text)
    if doc.get("format") != FORMAT:
        raise ScheduleFileError("not a saved polyc schedule (no 'format': 'polyc-schedule')", "format")
    version = doc.get("version")
    if isinstance(version, bool) or version != VERSION:
        raise ScheduleFileError(f"version {schedule_file._show(version)} is not supported (this polyc reads "
                                f"version {VERSION})", "version")
    names = [st.name for st in model.program.statements]
    if doc.get("statements") != names:
        raise ScheduleFileError(f"the saved schedule is for statements {schedule_file._show(doc.get('statements'))} "
                                f"of kernel {schedule_file._show(doc.get('kernel'))}; this kernel "
                                f"({model.program.name!r}) has {names}", "statements")
    target = _target_of(doc)
    replayable_flag = schedule_file.expect(doc.get("replayable", True), (bool,), "replayable", "'replayable'")
    s = _restore_raw(start, doc) if not replayable_flag else _replay(start, doc)
    checked = {}
    if "auto_request" in doc:
        checked["auto_request"] = saved_auto.check_request(doc["auto_request"])
    if "gpu_contractions" in doc:
        checked["gpu_contractions"] = saved_auto.check_gpu_plans(doc["gpu_contractions"], names)
    for key, value in checked.items():
        if replayable_flag:
            raise ScheduleFileError(f"only an automatic (raw) schedule has {key!r}", key)
        rederive = REDERIVERS.get(key)
        again = rederive(start, s, value, doc.get("dims")) if rederive is not None else None
        if again is not None:
            s = again
            break
    return replace(s, target=target) if target is not None else s


def _target_of(doc: dict) -> Any:
    """The `polyc.Target` recorded in the file (validated: untrusted), or None."""
    if "target" not in doc:
        return None
    from ..errors import TargetError
    from ..target import Target
    try:
        return Target.from_dict(doc["target"])
    except TargetError as e:
        raise ScheduleFileError(str(e), f"target.{e.field}" if e.field else "target") from None


def to_text(s: Schedule) -> str:
    """The primitive chain as Python source, then the loop outline."""
    return chain_text(s) + "\n\n" + tree_text(s)
