"""Triage of the kernel fuzzer's failures: which ones are bugs another area is already fixing.

A failure is re-run with the suspected cause removed; if it then passes, it belongs to that class:

- "known:nan-through-max/min": NaN propagation through max/min: the kernel uses max/min and the
  case passes once the inputs' NaN are replaced by 0 (or, when an expected NaN came out as a
  number, once NaN and inf are: NaN made inside the kernel from inf);
- "known:python-%-//": Python's floored `%` and `//` on negative integers in loop kernels (the
  reference re-run with C's truncating meaning, `np.fmod`);
- "likely:nan-through-max/min": the kernel uses max/min and the case passes on finite inputs
  only (NaN made from inf inside the kernel, then treated differently by a max/min; a wrong value
  may then spread, so the signature is not checked), or every difference is a NaN expected where
  a number came out (NaN made from an empty reduction's infinite identity); confirm by minimising;
- "new" otherwise: a bug to minimise and report.
"""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any, Callable

import numpy as np


class _TruncatingDivision(ast.NodeTransformer):
    """`a % b` -> `np.fmod(a, b)`, `a // b` -> `(a - np.fmod(a, b)) // b` (C's meaning)."""

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        self.generic_visit(node)
        fmod = ast.Call(func=ast.Attribute(ast.Name("np", ast.Load()), "fmod", ast.Load()),
                        args=[node.left, node.right], keywords=[])
        if isinstance(node.op, ast.Mod):
            return ast.copy_location(fmod, node)
        if isinstance(node.op, ast.FloorDiv):
            exact = ast.BinOp(ast.BinOp(node.left, ast.Sub(), fmod), ast.FloorDiv(), node.right)
            return ast.copy_location(exact, node)
        return node


def truncating_reference(source: str, name: str) -> Callable[[Any], Callable[..., Any]]:
    """An oracle factory for `run_case`: the loop kernel's Python with C's `%` and `//`."""
    import polyc as pc
    from ..runtime.interpreter import interpret
    tree = ast.fix_missing_locations(_TruncatingDivision().visit(ast.parse(source)))
    namespace = {"pc": pc, "np": np, "math": __import__("math")}
    exec(compile(tree, f"<truncating {name}>", "exec"), namespace)
    fn = namespace[name]

    class _Proxy:
        def __init__(self, kernel):
            self.function, self.program = fn, kernel.program

    return lambda kernel: (lambda **kw: interpret(_Proxy(kernel), kw))


def classify(r) -> str:
    """The class of a failed `CaseResult` (see the module docstring)."""
    from .kernel_fuzz import run_case
    case = r.case
    if r.status != "mismatch":
        return "new"
    if r.failed_sizes is not None:      # re-run only the draw that failed
        case = replace(case, sizes=(r.failed_sizes,))
    nan_lost = "expected np.float" in r.detail and "(nan)" in r.detail
    if case.specials and {"max", "min"} & set(case.kernel.features):
        if run_case(replace(case, nan_free=True)).status == "ok":
            return "known:nan-through-max/min"
        # NaN made inside the kernel (inf - inf, 0 * inf) and then lost by a max/min
        if run_case(replace(case, finite_only=True)).status == "ok":
            return "known:nan-through-max/min" if nan_lost else "likely:nan-through-max/min"
    if {"max", "min"} & set(case.kernel.features) and r.only_nan_lost:
        return "likely:nan-through-max/min"     # e.g. inf - inf of an empty min=!'s identity
    if case.kernel.language == "loops" and ("%" in case.kernel.source or "//" in case.kernel.source):
        oracle = truncating_reference(case.kernel.source, case.kernel.name)
        if run_case(case, reference=oracle).status == "ok":
            return "known:python-%-//"
        if case.specials and run_case(replace(case, nan_free=True), reference=oracle).status == "ok":
            return "known:nan-through-max/min+python-%-//"
    return "new"
