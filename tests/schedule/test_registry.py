"""One registry of primitives: Schedule's methods, JSON replay and the README list all come from
`polyc.schedule.registry.PRIMITIVES`, and its `Param`s are precise enough to enumerate calls."""
import ast
import importlib
import inspect
import itertools
import json
import pathlib
import re

import pytest

import polyc as pc
from polyc.errors import PolycError, ScheduleFileError
from polyc.schedule import Schedule
from polyc.schedule.params import KINDS, REQUIRED, check_arguments
from polyc.schedule.registry import ALIASES, PRIMITIVES, primitive

ROOT = pathlib.Path(__file__).resolve().parents[2]
DESIGN_NAMES = ("tile", "split", "interchange", "skew", "reverse", "shift", "fuse", "distribute", "unroll",
                "unroll_and_jam", "peel", "parallel", "vectorize", "map_to_blocks", "map_to_threads")
matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
two = pc.kernel("B[i] = A[i] * 2\nC[i] = B[i] + 1", name="two")


def test_every_primitive_of_the_design_is_registered_with_one_module_each():
    assert set(DESIGN_NAMES) <= set(PRIMITIVES)
    for name, prim in PRIMITIVES.items():
        module = importlib.import_module(f"polyc.schedule.primitives.{name}")
        assert module.PRIMITIVE is prim and prim.name == name
        assert "Before::" in prim.doc and "After" in prim.doc, name  # the loop outlines
        assert prim.obligations and prim.targets <= {"c", "cuda", "cuda-emu"}


@pytest.mark.parametrize("name", list(PRIMITIVES) + list(ALIASES))
def test_params_match_apply_and_the_schedule_method(name):
    prim = PRIMITIVES.get(name) or ALIASES[name]
    applied = list(inspect.signature(prim.apply).parameters.values())[1:]
    assert [p.name for p in prim.params] == [p.name for p in applied]
    for param, py in zip(prim.params, applied):
        assert param.kind in KINDS and param.doc
        if py.default is not inspect.Parameter.empty:
            assert param.default == py.default, (name, param.name)
        elif py.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            assert param.default is REQUIRED, (name, param.name)
    method = getattr(Schedule, name)
    assert list(inspect.signature(method).parameters)[1:] == [p.name for p in applied]
    assert method.__doc__  # a real method with its own docstring, not a generated stub


def test_apply_equals_the_method():
    s = matmul.schedule()
    assert primitive("tile").apply(s, i=32) == s.tile(i=32)
    assert type(primitive("tile").apply(s, i=32)) is Schedule
    assert primitive("split").apply(s, "k", 4).unroll("k_inner") == s.split("k", 4).unroll("k_inner")
    with pytest.raises(PolycError, match="no schedule primitive named 'tiles'"):
        primitive("tiles")


def test_schedule_methods_dispatch_through_the_registry(monkeypatch):
    """The methods look the primitive up at call time: a primitive replaced in the registry is
    the one a method runs (what a tuner or an extension relies on)."""
    calls = []
    original = PRIMITIVES["reverse"]
    wrapped = original.__class__(original.name, original.params,
                                 lambda s, loop: calls.append(loop) or original.apply(s, loop),
                                 original.doc, original.obligations, original.targets)
    import polyc.schedule.schedule as schedule_module
    patched = dict(PRIMITIVES)
    patched["reverse"] = wrapped
    monkeypatch.setattr(schedule_module, "PRIMITIVES", patched)
    two.schedule().reverse("i")
    assert calls == ["i"]


def test_the_registry_is_read_only():
    with pytest.raises(TypeError):
        PRIMITIVES["tile"] = None  # type: ignore[index]


def _candidates(s, param, rng_ints=(1, 2)):
    """Candidate values for one parameter, generated from its kind (as a tuner would)."""
    kind = param.kind
    if kind in ("loop", "optional_loop"):
        return list(s.loop_names) + ([None] if kind == "optional_loop" else [])
    if kind == "loops":
        return [(n,) for n in s.loop_names]
    if kind == "statement":
        return list(s.statements)
    if kind == "statements":
        return [tuple(s.statements)]
    if kind == "loop_sizes":
        return [None] if param.default is None else [{n: 2} for n in s.loop_names]
    if kind == "bool":
        return [False, True]
    if kind in ("name", "target"):
        return [None]
    lo, hi = param.bounds
    values = [v for v in (lo, *rng_ints, hi) if lo <= v <= hi and abs(v) < 64]
    return values + ([None] if kind == "optional_int" else [])


@pytest.mark.parametrize("name", [n for n in PRIMITIVES if n != "pack"])
def test_calls_enumerated_from_params_are_accepted_or_refused_cleanly(name):
    """Every argument tuple generated from the Params passes `check_arguments`, and applying it
    gives a new schedule or a PolycError: never a TypeError or another crash."""
    prim = PRIMITIVES[name]
    s = two.schedule()
    pools = [_candidates(s, p) for p in prim.params]
    applied = 0
    for combo in itertools.islice(itertools.product(*pools), 40):
        args, kwargs = [], {}
        for p, v in zip(prim.params, combo):
            py = inspect.signature(prim.apply).parameters[p.name]
            if py.kind == inspect.Parameter.VAR_POSITIONAL:
                args.extend(v)
            elif py.kind == inspect.Parameter.VAR_KEYWORD:
                kwargs.update(v)
            elif py.kind == inspect.Parameter.KEYWORD_ONLY or (v is None and p.default is None):
                if v is not None:
                    kwargs[p.name] = v
            else:
                args.append(v)
        check_arguments(prim, args, kwargs)
        try:
            out = prim.apply(s, *args, **kwargs)
        except PolycError:
            continue
        assert isinstance(out, Schedule) and out.steps[-1].name in (name, "split")
        applied += 1
    # These need two statements or two nested loops (`two` has one loop).
    assert applied or name in ("fuse", "map_to_blocks", "map_to_threads", "skew", "interchange", "reorder",
                               "index_split")


def test_replay_validates_arguments_against_the_params():
    doc = json.loads(matmul.schedule().split("k", 4).unroll("k_inner", 2).to_json())
    doc["steps"][1]["kwargs"]["factor"] = 5000
    with pytest.raises(ScheduleFileError, match="between 1 and 1024") as info:
        Schedule.from_json(matmul, json.dumps(doc))
    assert info.value.where == "steps[1].kwargs.factor"
    doc["steps"][1]["kwargs"] = {"factor": 2, "fully": True}
    with pytest.raises(ScheduleFileError, match="takes no argument 'fully'") as info:
        Schedule.from_json(matmul, json.dumps(doc))
    assert info.value.where == "steps[1].kwargs.fully"


def test_old_parallel_reduction_steps_still_replay():
    total = pc.kernel("s +=! A[i, j]", name="total")
    s = total.schedule().parallel_reduction("i")
    doc = json.loads(s.to_json())
    doc["steps"] = [{"primitive": "parallel_reduction", "args": ["i"], "kwargs": {}}]
    assert Schedule.from_json(total, json.dumps(doc)).dims == s.dims


def test_the_readme_lists_exactly_the_registered_primitives():
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| primitive | what it does |"):]
    table = table[:table.index("\n\n")]
    listed = set(re.findall(r"`(\w+)\(", "\n".join(line.split("|")[1] for line in table.splitlines()[2:])))
    assert listed == set(PRIMITIVES)


def _is_module(dotted: str) -> bool:
    path = ROOT / dotted.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: pathlib.Path, package: str):
    """Modules of polyc.schedule that `path` imports, at top level or inside functions."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import module` imports the module (its package is only a parent).
            submodules = [f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}")]
            out.update(n for n in (submodules or [mod]) if n.startswith("polyc.schedule"))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("polyc.schedule"))
    return out


def test_schedule_and_primitives_import_no_cycle():
    """Nothing that schedule.py imports (the state, rewrite, the primitives, the registry, and
    what they import) imports schedule.py back, not even inside a function."""
    root = ROOT / "polyc" / "schedule"
    modules = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts)
        is_package = path.name == "__init__.py"
        if is_package:
            name = name[: -len(".__init__")]
        modules[name] = _imports(path, name if is_package else name.rsplit(".", 1)[0])
    graph = {m: {d for d in deps if d in modules and d != m} for m, deps in modules.items()}
    start = "polyc.schedule.schedule"
    seen, todo = set(), list(graph[start])
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(graph[m])
    assert start not in seen, sorted(m for m in seen if start in graph[m])
    assert "polyc.schedule.registry" in seen and "polyc.schedule.primitives.tile" in seen


def test_the_schedule_fuzzer_draws_registered_primitives():
    from polyc.testing.fuzz import PRIMITIVES as FUZZED
    assert set(FUZZED) <= set(PRIMITIVES)


def test_a_saved_pack_step_never_names_a_target():
    """`pack(..., target=...)` records the values its Target resolved, not the Target; a file whose
    step names one is refused with the place."""
    import json

    from polyc.errors import ScheduleFileError
    from polyc.target import Target
    s = matmul.schedule().pack("S1", target=Target.host().with_(vector_bytes=32))
    doc = json.loads(s.to_json())
    step = next(st for st in doc["steps"] if st["primitive"] == "pack")
    assert "target" not in step["kwargs"] and step["kwargs"]["vector_bytes"] == 32
    step["kwargs"]["target"] = {"kind": "c"}
    with pytest.raises(ScheduleFileError) as err:
        Schedule.from_json(matmul, json.dumps(doc))
    assert "target" in err.value.where
