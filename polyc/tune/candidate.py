"""A tuning candidate: a schedule recipe (seed, `auto_schedule` knobs, primitive steps) as JSON values.

Records store candidates, so `Candidate.from_dict` reads untrusted JSON: every field is checked
and a step may only name a registered primitive with plain values (no code runs from a record).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, List, Tuple

from ..errors import TuneRecordError
from .registry_view import primitives


def _small_int(v: Any, allow_zero: bool = False) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and (-4096 if allow_zero else 1) <= v <= 1 << 16


Step = Tuple[str, Tuple[Any, ...], Tuple[Tuple[str, Any], ...]]
DEFAULT = None  # a gene at DEFAULT leaves the seed's own decision


@dataclass(frozen=True)
class Candidate:
    """A schedule recipe: seed, `auto_schedule` knobs, then primitive steps (all JSON values)."""

    seed: str
    knobs: Tuple[Tuple[str, Any], ...] = ()
    steps: Tuple[Step, ...] = ()

    def to_dict(self) -> dict:
        knobs = {k: (dict(v) if k == "tile_sizes" else v) for k, v in self.knobs}
        return {"seed": self.seed, "knobs": knobs,
                "steps": [{"primitive": n, "args": list(a), "kwargs": dict(kw)} for n, a, kw in self.steps]}

    def key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(doc: Any, where: str = "candidate") -> "Candidate":
        """A candidate from untrusted JSON: shape, names and value types checked (TuneRecordError)."""
        if not isinstance(doc, dict) or set(doc) != {"seed", "knobs", "steps"}:
            raise TuneRecordError("expected an object with exactly 'seed', 'knobs' and 'steps'", where)
        if doc["seed"] not in ("auto", "source"):
            raise TuneRecordError(f"unknown seed {doc['seed']!r}", f"{where}.seed")
        knobs = doc["knobs"]
        if not isinstance(knobs, dict) or not set(knobs) <= set(KNOBS):
            raise TuneRecordError(f"knobs must be an object with keys among {', '.join(KNOBS)}", f"{where}.knobs")
        clean: List[Tuple[str, Any]] = []
        for k in sorted(knobs):
            v = knobs[k]
            if k == "tile_sizes":
                if not isinstance(v, dict) or not all(isinstance(n, str) and _small_int(s) for n, s in v.items()):
                    raise TuneRecordError("tile_sizes must map loop names to positive integers", f"{where}.knobs")
                v = tuple(sorted(v.items()))
            elif not isinstance(v, bool):
                raise TuneRecordError(f"knob {k} must be true or false", f"{where}.knobs")
            clean.append((k, v))
        prims = primitives()
        steps = doc["steps"]
        if not isinstance(steps, list) or len(steps) > 32:
            raise TuneRecordError("steps must be a list of at most 32 primitive calls", f"{where}.steps")
        out: List[Step] = []
        for i, st in enumerate(steps):
            w = f"{where}.steps[{i}]"
            if not isinstance(st, dict) or set(st) != {"primitive", "args", "kwargs"}:
                raise TuneRecordError("a step has exactly 'primitive', 'args' and 'kwargs'", w)
            if st["primitive"] not in prims:
                raise TuneRecordError(f"unknown primitive {st['primitive']!r}", w)
            if not isinstance(st["args"], list) or not isinstance(st["kwargs"], dict):
                raise TuneRecordError("args must be a list and kwargs an object", w)
            for v in list(st["args"]) + list(st["kwargs"].values()):
                if not (_small_int(v, allow_zero=True) or isinstance(v, (str, bool)) or v is None):
                    raise TuneRecordError(f"argument {v!r} is not a loop name, integer or boolean", w)
            if not all(isinstance(k, str) and k.isidentifier() for k in st["kwargs"]):
                raise TuneRecordError("keyword names must be identifiers", w)
            out.append((st["primitive"], tuple(st["args"]), tuple(sorted(st["kwargs"].items()))))
        return Candidate(doc["seed"], tuple(clean), tuple(out))


KNOBS = ("tile_sizes", "register_blocking", "jam_rows", "pack")
