"""Affine integer expressions over named variables (loop indices and size symbols).

They are the language of subscripts, bounds and shapes.  This is a representation only: every
question about sets of points (emptiness, bounds, dependences) is answered by isl.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Tuple, Union


@dataclass(frozen=True)
class Affine:
    """`sum(coeff * var) + constant`, with integer coefficients; terms kept sorted and non-zero."""

    terms: Tuple[Tuple[str, int], ...] = ()
    constant: int = 0

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def const(c: int) -> "Affine":
        return Affine((), int(c))

    @staticmethod
    def var(name: str, coeff: int = 1) -> "Affine":
        return Affine(((name, int(coeff)),) if coeff else (), 0)

    @staticmethod
    def from_dict(coeffs: Mapping[str, int], constant: int = 0) -> "Affine":
        return Affine(tuple(sorted((k, int(v)) for k, v in coeffs.items() if v)), int(constant))

    @staticmethod
    def parse(text: str) -> "Affine":
        """Parse `"N - 1"`, `"2*i + j"`; raises ValueError for anything non-affine."""
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as e:
            raise ValueError(f"not an affine expression: {text!r}") from e
        return _from_ast(tree, text)

    # -- queries -----------------------------------------------------------------------------
    @property
    def coeffs(self) -> Dict[str, int]:
        return dict(self.terms)

    @property
    def variables(self) -> Tuple[str, ...]:
        return tuple(v for v, _ in self.terms)

    def coeff(self, name: str) -> int:
        return self.coeffs.get(name, 0)

    @property
    def is_constant(self) -> bool:
        return not self.terms

    def as_single_var(self) -> Union[str, None]:
        """The variable name if this is exactly `v`, else None."""
        if self.constant == 0 and len(self.terms) == 1 and self.terms[0][1] == 1:
            return self.terms[0][0]
        return None

    # -- arithmetic --------------------------------------------------------------------------
    def __add__(self, other: Union["Affine", int]) -> "Affine":
        other = _lift(other)
        c = self.coeffs
        for k, v in other.terms:
            c[k] = c.get(k, 0) + v
        return Affine.from_dict(c, self.constant + other.constant)

    __radd__ = __add__

    def __neg__(self) -> "Affine":
        return Affine(tuple((k, -v) for k, v in self.terms), -self.constant)

    def __sub__(self, other: Union["Affine", int]) -> "Affine":
        return self + (-_lift(other))

    def __rsub__(self, other: Union["Affine", int]) -> "Affine":
        return _lift(other) - self

    def scale(self, k: int) -> "Affine":
        return Affine.from_dict({v: c * k for v, c in self.terms}, self.constant * k)

    def substitute(self, mapping: Mapping[str, "Affine"]) -> "Affine":
        out = Affine.const(self.constant)
        for v, c in self.terms:
            out = out + (mapping[v].scale(c) if v in mapping else Affine.var(v, c))
        return out

    def rename(self, mapping: Mapping[str, str]) -> "Affine":
        return Affine.from_dict({mapping.get(v, v): c for v, c in self.terms}, self.constant)

    def evaluate(self, values: Mapping[str, int]) -> int:
        return self.constant + sum(c * values[v] for v, c in self.terms)

    # -- printing ----------------------------------------------------------------------------
    def __str__(self) -> str:
        parts = []
        for v, c in self.terms:
            mag = abs(c)
            term = v if mag == 1 else f"{mag}*{v}"
            parts.append(("- " if c < 0 else "+ ") + term)
        if self.constant or not parts:
            parts.append(("- " if self.constant < 0 else "+ ") + str(abs(self.constant)))
        s = " ".join(parts)
        return s[2:] if s.startswith("+ ") else "-" + s[2:]

    def __repr__(self) -> str:
        return f"Affine({str(self)!r})"


def _lift(x: Union[Affine, int]) -> Affine:
    return x if isinstance(x, Affine) else Affine.const(int(x))


def _from_ast(node: ast.AST, text: str) -> Affine:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Affine.const(node.value)
    if isinstance(node, ast.Name):
        return Affine.var(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _from_ast(node.operand, text)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        lhs, rhs = _from_ast(node.left, text), _from_ast(node.right, text)
        if isinstance(node.op, ast.Add):
            return lhs + rhs
        if isinstance(node.op, ast.Sub):
            return lhs - rhs
        if isinstance(node.op, ast.Mult):
            if lhs.is_constant:
                return rhs.scale(lhs.constant)
            if rhs.is_constant:
                return lhs.scale(rhs.constant)
    raise ValueError(f"not an affine expression: {text!r}")


def affine_sum(items: Iterable[Affine]) -> Affine:
    out = Affine.const(0)
    for a in items:
        out = out + a
    return out
