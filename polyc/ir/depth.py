"""How deep an expression may nest, and the one mechanism that lets every walker cope with it.

A kernel's expressions are trees: `y[i] = x[i] + x[i] + ... + x[i]` with 1,000 terms is a chain
1,000 deep.  Every stage walks these trees recursively (typing, printing, the interpreter, the
front ends' lowering, dataclass equality and hashing), so rather than rewrite each walker, polyc
measures the depth once, iteratively, where a tree is built, and makes sure Python's recursion
limit leaves room for it (`ensure_recursion_room`): the limit is raised for the process (never
lowered) to what the deepest expression needs.  Past `MAX_EXPRESSION_DEPTH` the interpreter's C
stack itself could overflow, so such a tree is refused with a typed `ExpressionTooDeepError`
instead (README "Errors").  Kernels of ordinary depth leave the recursion limit untouched.
"""
from __future__ import annotations

import sys
from typing import Callable, Iterable, Optional, TypeVar

from ..errors import ExpressionTooDeepError, SourceLocation

#: The deepest expression tree polyc accepts (a sum of this many terms, or this many nested
#: parentheses).  Measured: CPython 3.11's C stack (8 MiB) overflows hashing a tree about 14,000
#: deep, so this keeps a wide margin for the stages that recurse with more C frames per level.
MAX_EXPRESSION_DEPTH = 3000

#: Python frames a recursive walker may use per level of a tree (calls such as typing's
#: `type_of -> operand_types -> type_of` take two or three), plus headroom for the stages around.
_FRAMES_PER_LEVEL = 6
_HEADROOM = 1000

T = TypeVar("T")


def tree_depth(root: T, children: Callable[[T], Iterable[T]]) -> int:
    """Levels in the tree under `root` (a leaf is 1), measured without recursion."""
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((c, level + 1) for c in children(node))
    return deepest


def expression_depth(expr) -> int:
    """Depth of a `polyc.ir` expression tree."""
    return tree_depth(expr, lambda e: e.children())


def ensure_recursion_room(depth: int, what: str = "an expression",
                          location: Optional[SourceLocation] = None) -> None:
    """Let recursive walkers handle trees `depth` deep; `ExpressionTooDeepError` past the limit.

    `what` and `location` name the expression for the error message.
    """
    if depth > MAX_EXPRESSION_DEPTH:
        raise ExpressionTooDeepError(
            f"{what} nests {depth} levels deep; polyc accepts expressions up to {MAX_EXPRESSION_DEPTH} "
            f"levels (terms of one sum, or nested parentheses): split it into several statements, "
            f"e.g. partial sums in an intermediate tensor", location)
    needed = _HEADROOM + _FRAMES_PER_LEVEL * depth
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)
