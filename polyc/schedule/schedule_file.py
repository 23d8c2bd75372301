"""Checking a saved schedule file before anything in it is used: it is untrusted input.

`from_json` (in `serialize.py`) reads files that may have been edited, truncated or written by
someone else.  Nothing in such a file is executed or pasted into generated code unchecked:

- the document's *shape* (`document`, `steps`, `dims`, ...): every field has the expected JSON
  type, size limits hold, and a failure names the place (`dims[3].name`) in a `ScheduleFileError`;
- every *name* it introduces (loop dimensions, new names given to `split`, origins): a plain ASCII
  identifier, not a C keyword, not reserved for polyc's own C names (`_...`, `polyc_...`), not a
  tensor, scalar or size of the kernel, and not used twice;
- the stored *maps* of a schedule saved without a replayable history (`prove_maps`): each must be
  a schedule of its statement, proven with isl for every size: in the expected space, defined on
  the whole iteration domain, single-valued and injective there (every instance runs exactly
  once, and no two instances at the same time), with coefficients small enough for the
  generated 64-bit loop arithmetic.  Dependence order and loop marks are then re-proved by
  `rewrite.validate` like after any primitive.

Why so strict: the maps become loops, the names become C identifiers.  A dependence check alone
accepts a map that runs every update twice (an extra dimension `0 <= t <= 1`), skips rows
(`i < 1`) or holds for one size only (`I = 5`).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import islpy as isl

from ..errors import PolycError, ScheduleFileError
from ..poly.islutil import isl_budget, isl_name
from ..poly.model import PolyModel
from .integers import MAX_SCHEDULE_INT, MAX_UNROLL_FACTOR, map_coefficients_fit
from .loop_names import derived_from, loop_name_problem
from .state import LABELS as MARKS, Dim, Unroll

#: Limits that keep a hostile file from costing unbounded time or memory.
MAX_FILE_CHARS = 4_000_000
MAX_MAP_CHARS = 200_000
MAX_DIMS = 256
MAX_STEPS = 10_000
MAX_HISTORY_CHARS = 2_000



def fail(where: str, message: str) -> ScheduleFileError:
    """The error for `message` at `where` in the file (raise it)."""
    return ScheduleFileError(message, where)


# -- the document ---------------------------------------------------------------------------------

def parse_document(text: object) -> Dict[str, Any]:
    """The JSON object of a saved schedule; ScheduleFileError for anything that is not one."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise fail("", f"not UTF-8 text ({e})") from None
    if not isinstance(text, str):
        raise fail("", f"expected the JSON text (str or bytes), not {type(text).__name__}")
    if len(text) > MAX_FILE_CHARS:
        raise fail("", f"{len(text)} characters is more than a schedule file holds (limit {MAX_FILE_CHARS})")

    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    try:
        doc = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise fail("", "invalid JSON (nested too deeply)") from None
    except ValueError as e:
        raise fail("", f"invalid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise fail("", f"not a saved polyc schedule (a JSON {type(doc).__name__}, not an object)")
    return doc


def expect(value: Any, types: Tuple[type, ...], where: str, what: str) -> Any:
    """`value` if it has one of `types` (bool never counts as int); else ScheduleFileError."""
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        raise fail(where, f"{what} must be {' or '.join(_json_type(t) for t in types)}, "
                          f"not {_show(value)}")
    return value


def _json_type(t: type) -> str:
    return {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "an object",
            type(None): "null"}.get(t, t.__name__)


def _show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def reserved_names(model: PolyModel) -> Set[str]:
    """Names a loop of `model` may not take: its tensors, scalars and sizes (C names in scope)."""
    program = model.program
    return {t.name for t in program.tensors} | {x.name for x in program.scalars} | set(program.sizes)


def check_identifier(value: Any, where: str, what: str, existing: Sequence[str] = ()) -> str:
    """`value` if it is a name polyc may print into C: one of `existing` (names the kernel itself
    has), or a plain ASCII identifier that is no C keyword and not polyc's own (`_`, `polyc_`)."""
    expect(value, (str,), where, what)
    if value in existing or derived_from(value, existing):
        return value
    problem = loop_name_problem(value)
    if problem:
        raise fail(where, f"{what} {_show(value)} {problem}")
    return value


# -- dims and the other fields of a raw (map-based) schedule -------------------------------------

def check_dims(model: PolyModel, doc: Dict[str, Any]) -> Tuple[Dim, ...]:
    """The `dims` of a saved raw schedule as Dims, with names, marks and unroll values checked."""
    entries = expect(doc.get("dims"), (list,), "dims", "'dims'")
    if not entries or len(entries) > MAX_DIMS:
        raise fail("dims", f"needs between 1 and {MAX_DIMS} dimensions, not {len(entries)}")
    reserved = reserved_names(model)
    iterators = {i for st in model.program.statements for i in st.iterators}
    seen: Dict[str, int] = {}
    dims: List[Dim] = []
    for k, entry in enumerate(entries):
        where = f"dims[{k}]"
        expect(entry, (dict,), where, "a dimension")
        unknown = set(entry) - {"name", "marks", "unroll", "origin"}
        if unknown:
            raise fail(where, f"unknown fields {sorted(unknown)}")
        name = entry.get("name")
        if name is not None:
            check_identifier(name, f"{where}.name", "the loop name", existing=sorted(iterators))
            if name in reserved:
                raise fail(f"{where}.name", f"loop name {name!r} is already a tensor, scalar or size of "
                                            f"kernel {model.program.name!r}")
            if name in seen:
                raise fail(f"{where}.name", f"loop name {name!r} is also the name of dims[{seen[name]}]")
            seen[name] = k
        marks = expect(entry.get("marks", []), (list,), f"{where}.marks", "the marks")
        for j, mark in enumerate(marks):
            expect(mark, (str,), f"{where}.marks[{j}]", "a mark")
            if mark not in MARKS:
                raise fail(f"{where}.marks[{j}]", f"unknown mark {_show(mark)}; marks are {', '.join(MARKS)}")
        if marks and name is None:
            raise fail(f"{where}.marks", f"marks {marks} on a scalar (ordering) dimension; only named loops "
                                         f"carry marks")
        unroll = expect(entry.get("unroll", 0), (int,), f"{where}.unroll", "the unroll value")
        if not -1 <= unroll <= MAX_UNROLL_FACTOR:
            raise fail(f"{where}.unroll", f"the unroll value must be -1 (full), 0 (none) or a factor up to "
                                          f"{MAX_UNROLL_FACTOR}, not {unroll}")
        if unroll and name is None:
            raise fail(f"{where}.unroll", "a scalar (ordering) dimension cannot be unrolled")
        origin = entry.get("origin")
        if origin is not None:
            check_identifier(origin, f"{where}.origin", "the origin", existing=sorted(iterators))
        dim = Dim(name, unroll=Unroll.from_legacy(unroll) if name is not None else Unroll.none(), origin=origin)
        for mark in marks:
            dim = dim.with_label(mark)
        if "unroll" in marks and dim.unroll.is_none:
            raise fail(f"{where}.unroll", "a loop labelled 'unroll' needs an unroll value (-1 full, or a factor)")
        dims.append(dim)
    loops = doc.get("loops")
    if loops is not None and loops != [d.name for d in dims if d.name is not None]:
        raise fail("loops", f"{_show(loops)} does not list the named dims "
                            f"{[d.name for d in dims if d.name is not None]}")
    return tuple(dims)


def check_history(doc: Dict[str, Any]) -> Tuple[str, ...]:
    """The `history` strings (shown in reprs and `to_text`, never executed), checked for shape."""
    history = expect(doc.get("history", []), (list,), "history", "'history'")
    if len(history) > MAX_STEPS:
        raise fail("history", f"more than {MAX_STEPS} entries")
    for k, entry in enumerate(history):
        expect(entry, (str,), f"history[{k}]", "a history entry")
        if len(entry) > MAX_HISTORY_CHARS or not entry.isprintable():
            raise fail(f"history[{k}]", "a history entry must be one printable line of text")
    return tuple(history)


def map_texts(doc: Dict[str, Any], statements: Sequence[str], required: bool) -> Dict[str, str]:
    """The stored `maps` (statement -> isl text), shape-checked; every statement's when `required`."""
    maps = doc.get("maps")
    if maps is None and not required:
        return {}
    expect(maps, (dict,), "maps", "'maps'")
    out = {}
    for name, text in maps.items():
        if name not in statements:
            raise fail(f"maps.{name}", f"no statement {name!r} in this kernel ({', '.join(statements)})")
        expect(text, (str,), f"maps.{name}", "a map")
        if len(text) > MAX_MAP_CHARS:
            raise fail(f"maps.{name}", f"a map of {len(text)} characters is longer than {MAX_MAP_CHARS}")
        out[name] = text
    missing = [n for n in statements if n not in out]
    if required and missing:
        raise fail("maps", f"no map for statements {', '.join(missing)}")
    return out


def parse_map(text: str, where: str) -> isl.Map:
    """`text` as an isl map (parsed before any budget: parsing counts as isl operations)."""
    try:
        return isl.Map(text)
    except isl.Error as e:
        raise fail(where, f"not an isl map ({str(e).strip() or 'syntax error'}): {_show(text)}") from None


# -- the proof that stored maps schedule each instance exactly once ------------------------------

def _check_space(model: PolyModel, m: isl.Map, name: str, n_iterators: int, n_dims: int, where: str) -> None:
    if m.domain_is_wrapping() or m.range_is_wrapping():
        raise fail(where, "a nested (wrapped) space is not a statement schedule")
    if m.get_tuple_name(isl.dim_type.in_) != isl_name(name) or m.dim(isl.dim_type.in_) != n_iterators:
        raise fail(where, f"must map statement {name} with {n_iterators} iterators, not "
                          f"{m.get_tuple_name(isl.dim_type.in_)} with {m.dim(isl.dim_type.in_)}")
    if m.has_tuple_name(isl.dim_type.out) or m.dim(isl.dim_type.out) != n_dims:
        raise fail(where, f"must map into the anonymous {n_dims}-dimensional schedule space of 'dims', not "
                          f"{m.get_tuple_name(isl.dim_type.out) or ''}[{m.dim(isl.dim_type.out)} dimensions]")
    params = {isl_name(p) for p in model.params}
    extra = [m.get_dim_name(isl.dim_type.param, k) for k in range(m.dim(isl.dim_type.param))
             if m.get_dim_name(isl.dim_type.param, k) not in params]
    if extra:
        raise fail(where, f"uses sizes {', '.join(extra)} that kernel {model.program.name!r} does not have")


def _check_coefficients(m: isl.Map, where: str) -> None:
    """Every coefficient, constant and division of `m` within +-MAX_MAP_COEFFICIENT."""
    if not map_coefficients_fit(m):
        raise fail(where, "has a coefficient or constant beyond +-2**32; the generated loops could "
                          "overflow 64-bit integers")


def _example(model: PolyModel, points: isl.Set) -> str:
    """One point of `points` as `S1[i=0, j=2] with I=1, J=3` (for messages)."""
    p = points.sample_point()
    if p.is_void():
        return ""
    coords = [int(p.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(points.dim(isl.dim_type.set))]
    sizes = [f"{points.get_dim_name(isl.dim_type.param, k)}="
             f"{int(p.get_coordinate_val(isl.dim_type.param, k).to_python())}"
             for k in range(points.dim(isl.dim_type.param))]
    name = points.get_tuple_name()
    statement = model.program.statement(model.statement_by_isl_name(name).name) if name else None
    its = statement.iterators if statement is not None else [f"x{k}" for k in range(len(coords))]
    inst = f"{name}[{', '.join(f'{i}={v}' for i, v in zip(its, coords))}]"
    return f", e.g. {inst}" + (f" with {', '.join(sizes)}" if sizes else "")


def _check_scalar_dims(m: isl.Map, dims: Sequence[Dim], where: str) -> None:
    """Scalar (unnamed) dimensions only order statements: over all sizes they take finitely many
    values.  One that grows with the sizes would be a loop without a name (no marks, hidden from
    the outline), so its kind in `dims` would be wrong."""
    times = m.range()
    times = times.project_out(isl.dim_type.param, 0, times.dim(isl.dim_type.param))
    n = len(dims)
    for k, d in enumerate(dims):
        if d.is_loop:
            continue
        values = times.project_out(isl.dim_type.set, k + 1, n - k - 1).project_out(isl.dim_type.set, 0, k)
        # Sound either way: the set itself, simplified, or with its existentials dropped (an
        # over-approximation); leftover existentials of split pieces make `{ [0] }` look unbounded.
        if not (values.is_bounded() or values.coalesce().is_bounded() or values.remove_divs().is_bounded()):
            raise fail(where, f"dimension {k} is a scalar (ordering) dimension in 'dims' but the map makes it "
                              f"a loop; name it in 'dims' or make it constant")


def prove_maps(model: PolyModel, dims: Sequence[Dim], texts: Dict[str, str]) -> Tuple[Tuple[str, isl.Map], ...]:
    """The statement maps of `texts`, each proven (with isl, for all sizes) to run every instance of
    its statement exactly once, at a time no other instance uses.  ScheduleFileError otherwise
    (also when the proof exceeds polyc's isl operation budget: a file must not cost a hang)."""
    try:
        return _prove_maps(model, dims, texts)
    except ScheduleFileError:
        raise
    except PolycError as e:
        raise fail("maps", f"the maps could not be proven correct: {e}") from e


def _prove_maps(model: PolyModel, dims: Sequence[Dim], texts: Dict[str, str]) -> Tuple[Tuple[str, isl.Map], ...]:
    parsed = {}
    for st in model.program.statements:
        where = f"maps.{st.name}"
        m = parse_map(texts[st.name], where)
        _check_space(model, m, st.name, len(st.iterators), len(dims), where)
        _check_coefficients(m, where)
        parsed[st.name] = m
    context = model.codegen_context
    union: Optional[isl.UnionMap] = None
    with isl_budget("proving the saved schedule's maps"):
        for st in model.program.statements:
            where = f"maps.{st.name}"
            domain = model.domains[st.name].intersect_params(context)
            m = parsed[st.name].align_params(domain.get_space()).intersect_domain(domain)
            missed = domain.subtract(m.domain())
            if not missed.is_empty():
                raise fail(where, f"does not schedule every instance of statement {st.name} for every size "
                                  f"(some would never run{_example(model, missed)})")
            if not m.is_single_valued():
                twice = m.reverse().apply_range(m).subtract(isl.Map.identity(m.get_space().range().map_from_set()))
                raise fail(where, f"runs some instance of statement {st.name} at more than one time (it would "
                                  f"run twice{_example(model, twice.apply_range(m.reverse()).range())})")
            if not m.is_injective():
                raise fail(where, f"puts two instances of statement {st.name} at the same schedule time, "
                                  f"so their order is undefined")
            _check_scalar_dims(m, dims, where)
            piece = isl.UnionMap.from_map(m)
            union = piece if union is None else union.union(piece)
        if union is not None and not union.is_injective():
            raise fail("maps", "two statements run at the same schedule time, so their order is undefined")
    return tuple((st.name, parsed[st.name]) for st in model.program.statements)


# -- steps of a replayable schedule --------------------------------------------------------------

def check_steps(model: PolyModel, doc: Dict[str, Any], replayable: Sequence[str]) -> List[Tuple[str, list, dict]]:
    """The recorded primitive calls as (primitive, args, kwargs), shape-checked: known primitives,
    JSON scalars (or a name -> int object, as `tile`'s first argument, or a flat list of names and
    positions, as `interchange`'s `statements`) as arguments, and every
    string a name the kernel has or a plain identifier (new loop names end up in C)."""
    steps = expect(doc.get("steps", []), (list,), "steps", "'steps'")
    if len(steps) > MAX_STEPS:
        raise fail("steps", f"more than {MAX_STEPS} steps")
    known = sorted({i for st in model.program.statements for i in st.iterators}
                   | {st.name for st in model.program.statements})
    reserved = reserved_names(model) - set(known)
    tensors = {t.name for t in model.program.tensors}
    out = []
    for k, entry in enumerate(steps):
        where = f"steps[{k}]"
        expect(entry, (dict,), where, "a step")
        name = entry.get("primitive")
        if not isinstance(name, str) or name not in replayable:
            raise fail(f"{where}.primitive", f"unknown primitive {_show(name)}")
        args = expect(entry.get("args", []), (list,), f"{where}.args", "the arguments")
        kwargs = expect(entry.get("kwargs", {}), (dict,), f"{where}.kwargs", "the keyword arguments")
        for j, a in enumerate(args):
            _check_argument(a, f"{where}.args[{j}]", known, reserved)
        tensor_params = _tensor_params(name)
        for key, a in kwargs.items():
            if key.startswith("_") and key not in known and not derived_from(key, known):
                raise fail(f"{where}.kwargs", f"{name} takes no argument {key!r}")
            check_identifier(key, f"{where}.kwargs", "an argument name", existing=known)
            if key in tensor_params:
                if not isinstance(a, str) or a not in tensors:
                    raise fail(f"{where}.kwargs.{key}", f"must name a tensor of the kernel "
                                                        f"({', '.join(sorted(tensors))}), not {_show(a)}")
                continue
            _check_argument(a, f"{where}.kwargs.{key}", known, reserved)
        out.append((name, list(args), dict(kwargs)))
    return out


def _tensor_params(primitive: str) -> Set[str]:
    """The parameters of `primitive` that name a tensor of the kernel (kind "tensor")."""
    from .registry import PRIMITIVES
    prim = PRIMITIVES.get(primitive)
    return {p.name for p in prim.params if p.kind == "tensor"} if prim is not None else set()


def _check_argument(value: Any, where: str, known: Sequence[str], reserved: Set[str]) -> None:
    if isinstance(value, str):
        check_identifier(value, where, "a name", existing=known)
        if value in reserved:
            raise fail(where, f"{value!r} is a tensor, scalar or size of the kernel, not a loop or statement")
    elif isinstance(value, dict):
        for key, v in value.items():
            check_identifier(key, where, "a loop name", existing=known)
            expect(v, (int,), f"{where}.{key}", "a size")
    elif isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > MAX_SCHEDULE_INT:
            raise fail(where, f"the integer {_show(value)} is beyond ±{MAX_SCHEDULE_INT}")
    elif isinstance(value, list):   # statements=[...]: names or positions, one level deep
        if len(value) > max(len(known), 1):
            raise fail(where, f"a list of {len(value)} names is longer than the schedule has names")
        for j, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, (str, int)):
                raise fail(f"{where}[{j}]", f"a list holds names or positions, not {_show(item)}")
            _check_argument(item, f"{where}[{j}]", known, reserved)
    elif not isinstance(value, (bool, type(None), float)):
        raise fail(where, f"an argument must be a name, a number, true/false or null, not {_show(value)}")
