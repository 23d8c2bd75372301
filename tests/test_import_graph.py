"""The import graph of `polyc` is acyclic and layered as DESIGN.md says.

Every module under `polyc/` is parsed with `ast`; every import counts, at module level or inside a
function (a lazy import still couples two modules), relative or absolute, and so does
`importlib.import_module("polyc...")` with a literal name.  The graph is checked twice: collapsed to
the packages of the pipeline (`ir`, `frontend`, `poly`, `schedule`, `codegen`, `runtime`, `tune`,
`viz`, `testing`, and `top` for `api`, `cli` and the package root) and module by module.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

ROOT = Path(__file__).resolve().parent.parent / "polyc"

#: Package layers, lowest first: a package may import only packages of a lower or equal layer.
#: `target` (and `target_text`, its reader), `compile_flags`, `display` and `errors` are leaves every layer may use.
LAYERS: Dict[str, int] = {"leaf": 0, "ir": 1, "frontend": 2, "poly": 3, "schedule": 4, "codegen": 5,
                          "runtime": 6, "top": 7, "tune": 8, "grad": 8, "program": 8, "viz": 9, "testing": 9, "cli": 10}
#: Users of the public API: they may import it (`polyc`, `polyc.api`); nothing of the pipeline
#: (ir ... runtime) imports them.  The tuner measures through `pc.compile`; `pc.grad` and programs build Kernels.
ABOVE = {"viz", "testing", "top", "tune", "grad", "program", "cli"}

def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(current: str, is_package: bool, level: int, name: Optional[str]) -> str:
    if level == 0:
        return name or ""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` except those under `if TYPE_CHECKING:` (never executed)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imports_of(name: str, path: Path, known: Set[str]) -> Iterator[str]:
    """The polyc modules that module `name` imports anywhere in its text."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"

    def existing(target: str) -> Optional[str]:
        while target and target not in known:   # `from .x import f`: the module is `.x`
            target = target.rpartition(".")[0]
        return target or None

    for node in _runtime_nodes(tree):
        targets: List[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node.level, node.module)
            # `from . import x` / `from .pkg import mod`: the submodule when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            text = node.args[0].value
            if text.startswith("."):
                level = len(text) - len(text.lstrip("."))
                text = _resolve(name, is_package, level, text.lstrip(".") or None)
            targets = [text]
        for t in targets:
            if t == "polyc" or t.startswith("polyc."):
                found = existing(t)
                if found and found != name:
                    yield found


def module_graph() -> Dict[str, Set[str]]:
    mods = modules()
    known = set(mods)
    return {name: set(imports_of(name, path, known)) for name, path in mods.items()}


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "api":
        return "top"
    if parts[1] in ("cli", "__main__"):
        return "cli"     # the command line: a user of everything, like a script
    if parts[1] in ("errors", "target", "target_text", "display", "compile_flags"):
        return "leaf"
    return parts[1]


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle of `graph` as a list of nodes (first == last), or None."""
    colour: Dict[str, int] = {}
    stack: List[str] = []

    def visit(n: str) -> Optional[List[str]]:
        colour[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if colour.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in colour:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(graph):
        if n not in colour:
            found = visit(n)
            if found:
                return found
    return None


def package_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    out: Dict[str, Set[str]] = {}
    for a, targets in graph.items():
        pa = package_of(a)
        if pa == "top" and a == "polyc":
            continue   # the package root only re-exports the public API
        out.setdefault(pa, set())
        for b in targets:
            if b == "polyc":
                continue
            pb = package_of(b)
            if pb != pa:
                out[pa].add(pb)
    return out


# -- the checks of the parser itself ------------------------------------------------------------

def test_the_parser_sees_lazy_relative_and_importlib_imports_not_type_checking_ones(tmp_path):
    pkg = tmp_path / "polyc"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text(
        "import importlib\n"
        "def f():\n    from .b import g\n    from .. import other\n"
        "    return importlib.import_module('polyc.sub.c')\n")
    (pkg / "sub" / "a.py").write_text((pkg / "sub" / "a.py").read_text()
                                      + "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n")
    for n in ("b", "c", "d"):
        (pkg / "sub" / f"{n}.py").write_text("")
    (pkg / "other.py").write_text("")
    known = {"polyc", "polyc.sub", "polyc.sub.a", "polyc.sub.b", "polyc.sub.c", "polyc.sub.d", "polyc.other"}
    got = set(imports_of("polyc.sub.a", pkg / "sub" / "a.py", known))
    assert got == {"polyc.sub.b", "polyc.sub.c", "polyc.other"}


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# -- the checks of polyc ---------------------------------------------------------------------------

def test_every_module_is_seen():
    graph = module_graph()
    assert "polyc.codegen.cuda" in graph and "polyc.schedule.legality" in graph
    assert "polyc.schedule.legality" in graph["polyc.schedule.gpu"]


def test_packages_are_acyclic():
    cycle = find_cycle(package_graph(module_graph()))
    assert cycle is None, f"package import cycle: {' -> '.join(cycle)}"


def test_modules_are_acyclic():
    cycle = find_cycle(module_graph())
    assert cycle is None, f"module import cycle: {' -> '.join(cycle)}"


def test_layering_follows_the_pipeline():
    """ir <- frontend <- poly <- schedule <- codegen <- runtime; viz, testing and the API above."""
    bad = []
    for a, targets in module_graph().items():
        pa = package_of(a)
        if a == "polyc":
            continue
        for b in targets:
            if b == "polyc":
                if pa not in ABOVE:
                    bad.append((a, b))
                continue
            pb = package_of(b)
            if pb == pa:
                continue
            if pb in ABOVE and pa not in ABOVE:
                bad.append((a, b))
            elif LAYERS[pb] > LAYERS[pa] and pa not in ABOVE:
                bad.append((a, b))
    assert not bad, "imports against the layering:\n" + "\n".join(f"{a} -> {b}" for a, b in sorted(bad))
