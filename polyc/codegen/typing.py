"""Element types of every tensor, scalar and expression of a program, for one specialisation.

The rules (documented in README "Types"): arrays must come in the declared dtype (or, when
undeclared, the dtype they are passed with); outputs and intermediates take the type of the
expression that defines them; arithmetic promotes as `polyc.ir.promote` says; literals and
undeclared scalars adopt the type of the other operand; integer `/` integer is a float64 division
(as in Python).  polyc never inserts a conversion the user did not write except these.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import ArgumentError, ParseError, PolycError
from ..ir import (Access, Binary, Call, Cast, Const, DType, Expr, IndexExpr, Program, ScalarRef, Select,
                  Unary, f32, f64, i64, promote, promote_numpy)

BOOL = DType("bool", "int", False, 1, "bool")


@dataclass(frozen=True)
class Typing:
    tensors: Dict[str, DType]
    scalars: Dict[str, DType]
    default_float: DType
    #: The type a float literal takes next to an integer (`(x % 2) / 4.0`): the kernel's float
    #: type when it has float arrays (float32 stays float32, as Halide's literals do), else
    #: float64 (numpy's answer for an integer and a Python float).
    literal_float: DType = f64
    #: Loop kernels, whose reference is the Python function: index values (loop indices, sizes)
    #: are Python ints, weak beside numpy data as NEP 50 says (int32 `A[i] * (i + 1)` stays int32
    #: and wraps), and arithmetic promotes as numpy does on numpy values (`promote_numpy`: int32
    #: with float32 is float64).  Einstein kernels index with int64 arrays and promote as C and
    #: Tensor Comprehensions do (`promote`).
    weak_indices: bool = False
    #: Scalars that are Python floats (`ScalarDecl.weak`): they adopt a float operand's type.
    weak_scalars: FrozenSet[str] = frozenset()
    #: type_of's answers by (node identity, hint); printers ask about every node of a tree, so
    #: without it a 1,000-term sum costs a million calls.  Holds the node, so its id stays unique.
    _memo: Dict[Tuple[int, Optional[DType]], Tuple[Expr, Optional[DType]]] = \
        field(default_factory=dict, compare=False, repr=False)
    _python_memo: Dict[int, Tuple[Expr, bool]] = field(default_factory=dict, compare=False, repr=False)

    def key(self) -> str:
        return ",".join(f"{k}:{v.name}" for k, v in sorted(self.tensors.items())) + ";" + \
            ",".join(f"{k}:{v.name}" for k, v in sorted(self.scalars.items())) + ";" + self.literal_float.name + \
            (";weak" if self.weak_indices else "") + \
            "".join(f";weak:{n}" for n in sorted(self.weak_scalars))

    def promote(self, a: DType, b: DType) -> DType:
        """The type two operand types combine in, by this program's rule (see `weak_indices`)."""
        return promote_numpy(a, b) if self.weak_indices else promote(a, b)

    def type_of(self, e: Expr, hint: Optional[DType] = None) -> Optional[DType]:
        """The type of `e`; None for a literal-only expression with no hint."""
        key = (id(e), hint)
        known = self._memo.get(key)
        if known is not None and known[0] is e:
            return known[1]
        t = self._type_of(e, hint)
        self._memo[key] = (e, t)
        return t

    def _type_of(self, e: Expr, hint: Optional[DType]) -> Optional[DType]:
        if isinstance(e, Const):
            if e.dtype is not None:
                return e.dtype
            if hint is not None and is_integer(hint) and isinstance(e.value, float) and math.isfinite(e.value):
                return self.literal_float   # a weak float literal is never an integer (`max(0.25, n)`)
            if hint is not None:
                return hint
            return None
        if isinstance(e, ScalarRef):
            if e.name in self.weak_scalars and hint is not None and hint.is_float:
                return hint     # a Python float beside a float32 value is a float32 (NEP 50)
            return self.scalars.get(e.name, hint or self.default_float)
        if isinstance(e, IndexExpr):     # a loop kernel's index is a Python int: weak beside numpy data
            return hint if self.weak_indices and hint is not None and hint != BOOL else i64
        if isinstance(e, Access):
            return self.tensors[e.tensor]
        if isinstance(e, _PYTHON_COMPOSITES) and self.python_number(e):
            own = self.python_type(e)      # as a weak value: what it converts to beside `hint`
            return own if hint is None or hint == BOOL or (own.is_float and not hint.is_float) else hint
        if isinstance(e, Cast):
            return e.dtype
        if isinstance(e, Unary):
            return BOOL if e.op == "not" else self.type_of(e.operand, hint)
        if isinstance(e, Binary):
            if e.op in ("<", "<=", ">", ">=", "==", "!=", "and", "or"):
                return BOOL
            a, b = self.operand_types(e, hint)
            if a is None or b is None:
                if BOOL in (a, b):      # a condition with literals: 0 or 1, as numpy's True + 1.0 is 2.0
                    literals = e.rhs if a == BOOL else e.lhs
                    return self.literal_float if any(_float_literal(x) for x in literals.walk()) or \
                        e.op == "/" else i64
                return a or b
            t = self.promote(a, b)
            if e.op == "/" and not t.is_float:
                return f64
            return t
        if isinstance(e, Select):
            known = [t for t in self.value_types((e.if_true, e.if_false), hint) if t is not None]
            return self.promote(known[0], known[1]) if len(known) == 2 else (known[0] if known else None)
        if isinstance(e, Call) and e.fn == "pow":
            return self._pow_type(e, hint)
        if isinstance(e, Call):
            types = self.value_types(e.args, hint, numpy_call=e.fn in ("max", "min", "fmax", "fmin"))
            known = [t for t in types if t is not None]
            t = known[0] if known else hint
            for u in known[1:]:
                t = self.promote(t, u)
            if e.fn in ("exp", "log", "sqrt", "tanh", "sin", "cos", "pow") and t is not None and not t.is_float:
                return f64
            return t
        raise PolycError(f"cannot type expression {e!r}")

    def _pow_type(self, e: Call, hint: Optional[DType]) -> Optional[DType]:
        """`pow(a, b)` follows numpy: integers give an integer (exact, wrapping like numpy), a float
        operand gives that float type; literals adopt the other operand's type (a float literal
        with an integer operand gives the kernel's float type, see `operand_types`)."""
        strong = [self.type_of(x, None) for x in e.args if not self.weak(x)]     # `A_f32[i] ** alpha`: float32
        known = [t for t in strong if t is not None and t != BOOL]
        if not known:
            types = [self.type_of(x, hint) for x in e.args]
            known = [t for t in types if t is not None]
            if not known:
                return None
        t = known[0]
        for u in known[1:]:
            t = self.promote(t, u)
        if not t.is_float and any(self.weak(x) and self.python_type(x).is_float for x in e.args):
            t = self.promote(t, self.literal_float)      # `B_int32[i] ** alpha` is a float power
        if not t.is_float:
            exponent = e.args[1]
            if isinstance(exponent, Unary) and exponent.op == "-" and isinstance(exponent.operand, Const):
                exponent = Const(-exponent.operand.value)
            if isinstance(exponent, Const) and not isinstance(exponent.value, bool) and exponent.value < 0:
                raise PolycError(f"pow of integers with the negative exponent {exponent.value}: numpy refuses "
                                 "it (\"Integers to negative integer powers are not allowed\"); make the base "
                                 "a float, e.g. pow(float(x), -1) or pow(x, -1.0)")
        return t

    def value_types(self, args: Sequence[Expr], hint: Optional[DType], numpy_call: bool = False
                    ) -> List[Optional[DType]]:
        """Types of values combined by a `select` or a function (`max`, `min`, ...): literals and
        undeclared scalars adopt the type of the others (their promotion), as in a binary
        operation; a float literal next to integers is the kernel's float (`select(c, A_int, 0.5)`
        is a float, as numpy's `np.where(c, A_int, 0.5)`: typing it as the integer truncated 0.5
        in the reference while C computed it in double).  In a `numpy_call` (`np.maximum`) a loop
        kernel's Python numbers are weak too, as NEP 50 makes them; Python's own `max` and `a if c
        else b` return an operand itself, so there they keep their type."""
        if self.weak_indices and not numpy_call:     # `x if c else 0.1`, `max(a, 0.1)`: the operand itself
            strong = [self.python_type(x) if self.weak(x) else self.type_of(x, None) for x in args]
        else:
            weak = self.weak if numpy_call else _adaptive
            strong = [self.type_of(x, None) if not weak(x) else None for x in args]
        known = [t for t in strong if t is not None and t != BOOL]
        if not known:
            return [self.type_of(x, hint) for x in args]
        other = known[0]
        for u in known[1:]:
            other = self.promote(other, u)
        return [t if t is not None else self.type_of(x, other) for x, t in zip(args, strong)]

    def operation_type(self, e: Binary, hint: Optional[DType]) -> Optional[DType]:
        """The type a comparison or arithmetic `e` converts both operands to and computes in: the
        C printer and `kernel.reference` both ask here, so they cannot disagree.  A comparison
        compares in `comparison_type`; arithmetic in the operands' `common_type`, else `hint`;
        `%` and `//` of literals alone in `literal_type` (int64 for integers)."""
        a, b = self.operand_types(e, hint)
        if e.op in ("<", "<=", ">", ">=", "==", "!="):
            return comparison_type(e, a, b, self.promote)
        common = common_type(a, b, self.promote) or hint
        if e.op in ("%", "//") and (common is None or common == BOOL):
            common = literal_type(e.lhs, e.rhs)
        return common

    def converts_each_step(self, st) -> bool:
        """Whether the `+=`/`*=` update `st` combines in a type wider than its target's (an integer
        target of a float value, float32 of float64) and so converts, and rounds, at every step:
        such a reduction is not associative, and no accumulator or tree may reorder it."""
        if st.update not in ("+", "*"):
            return False
        target = self.tensors[st.target.tensor]
        vt = self.type_of(st.value, target)
        return vt is not None and vt.name != "bool" and self.promote(target, vt) != target

    def weak(self, e: Expr) -> bool:
        """Whether `e` adopts the other operand's type: a literal, or (loop kernels) a Python
        number: an index value, a `float` parameter, or arithmetic of those (`python_number`)."""
        return self._weak_leaf(e) or (isinstance(e, _PYTHON_COMPOSITES) and self.python_number(e))

    def _weak_leaf(self, e: Expr) -> bool:
        return _adaptive(e) or (self.weak_indices and isinstance(e, IndexExpr)) or \
            (isinstance(e, ScalarRef) and e.name in self.weak_scalars)

    def python_number(self, e: Expr) -> bool:
        """Whether `e` is, in a loop kernel, a Python int or float: arithmetic (`+ - * / // %`,
        negation) of indices, sizes, literals and `float` parameters alone (`(i * 0.1) * 3.0`).
        Python computes it as Python does (`python_type`); beside a numpy value it is weak."""
        if not self.weak_indices or not isinstance(e, _PYTHON_COMPOSITES):
            return False
        known = self._python_memo.get(id(e))
        if known is not None and known[0] is e:
            return known[1]
        answer, stack = True, [e]
        while stack and answer:
            n = stack.pop()
            if isinstance(n, Cast) and n.dtype in (i64, f64):
                continue        # `int(x)`, `float(x)`: a Python number, whatever x was
            if isinstance(n, Binary) and n.op in _PYTHON_ARITHMETIC or isinstance(n, Unary) and n.op == "-":
                stack += [n.lhs, n.rhs] if isinstance(n, Binary) else [n.operand]
            elif isinstance(n, Call) and n.fn in ("abs", "pymax", "pymin"):
                stack += list(n.args)
            elif isinstance(n, Select):          # `a if c else b`: one of two Python numbers
                stack += [n.if_true, n.if_false]
            else:
                answer = self._weak_leaf(n)
        self._python_memo[id(e)] = (e, answer)
        return answer

    def python_type(self, e: Expr) -> DType:
        """The type Python computes the weak value `e` (a literal, or a `python_number`) in: float64
        where a float enters (a float literal or parameter, a true division), else int64."""
        stack: List[Expr] = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, Cast):
                if n.dtype.is_float:
                    return f64
                continue
            if _float_literal(n) or (isinstance(n, ScalarRef) and self.scalars[n.name].is_float) \
                    or (isinstance(n, Binary) and n.op == "/"):
                return f64
            stack.extend(n.args if isinstance(n, Call) else (n.lhs, n.rhs) if isinstance(n, Binary)
                         else (n.operand,) if isinstance(n, Unary) else (n.if_true, n.if_false)
                         if isinstance(n, Select) else ())
        return i64

    def operand_types(self, e: Binary, hint: Optional[DType]):
        """Types of both operands; a literal or undeclared scalar adopts the other operand's type."""
        a = self.type_of(e.lhs, None) if not self.weak(e.lhs) else None
        b = self.type_of(e.rhs, None) if not self.weak(e.rhs) else None
        if a is None and b is None:
            a = self.type_of(e.lhs, hint)
            b = self.type_of(e.rhs, hint)
        elif a is None:
            a = self.type_of(e.lhs, b if b is not None and b != BOOL else hint)
        elif b is None:
            b = self.type_of(e.rhs, a if a != BOOL else hint)
        if _float_literal(e.lhs) and is_integer(b):
            a = self.literal_float          # never an integer: a weak float of the kernel's type
        if _float_literal(e.rhs) and is_integer(a):
            b = self.literal_float
        return a, b


#: The operations of Python numbers a loop kernel computes as Python does (`Typing.python_number`).
_PYTHON_ARITHMETIC = ("+", "-", "*", "/", "//", "%")
#: The expressions that can make a Python number of Python numbers.
_PYTHON_COMPOSITES = (Binary, Unary, Cast, Call, Select)


def _adaptive(e: Expr) -> bool:
    return isinstance(e, Const) and e.dtype is None


def is_integer(t: Optional[DType]) -> bool:
    """Whether `t` is an integer element type (not a float, not a condition, not unknown)."""
    return t is not None and t != BOOL and not t.is_float


def comparison_type(e: Binary, a: Optional[DType], b: Optional[DType], promotion=promote) -> Optional[DType]:
    """The type a comparison compares in: its operands' `common_type`, widened to int64 where an
    integer literal does not fit it (`A_u8 < 300` is true for every element, as numpy says)."""
    from ..ir.literals import integer_literal_fits
    common = common_type(a, b, promotion)
    for x in (e.lhs, e.rhs):
        sign = 1
        if isinstance(x, Unary) and x.op == "-":
            sign, x = -1, x.operand
        if is_integer(common) and _adaptive(x) and isinstance(x.value, int) and not isinstance(x.value, bool) \
                and not integer_literal_fits(sign * x.value, common):
            return i64
    return common


def common_type(a: Optional[DType], b: Optional[DType], promotion=promote) -> Optional[DType]:
    """The type two operands are combined in (a comparison, an arithmetic operation): their
    `promotion`, a condition or unknown side taking the other's; None when neither is known."""
    if a is None or a == BOOL:
        return b if b != BOOL else None
    if b is None or b == BOOL:
        return a
    return promotion(a, b)


def literal_type(*operands: Expr) -> DType:
    """The type of an operation between literals alone: int64 for integers, else float64 (Python's rule)."""
    ints = all(isinstance(x, Const) and isinstance(x.value, int) for x in operands)
    return i64 if ints else f64


def _float_literal(e: Expr) -> bool:
    """A weak literal written as a float (`4.0`): never an integer, whatever it meets."""
    return _adaptive(e) and isinstance(e.value, float)  # type: ignore[attr-defined]


def resolve_typing(program: Program, passed: Mapping[str, DType], default: DType = f32,
                   require_inputs: bool = True) -> Typing:
    """Fix every tensor's and scalar's dtype from declarations, passed arrays and definitions.

    With `require_inputs=False` (source inspection before any call), undeclared inputs take
    `default` instead of being reported missing.
    """
    if not require_inputs:
        # Undeclared inputs take `default` as if arrays of that type were passed, so the source
        # shown before any call is the one a call with such arrays runs (its literals included).
        passed = dict(passed)
        for t in program.tensors:
            if t.dtype is None and t.role in ("input", "inout") and t.name not in passed:
                passed[t.name] = default
    tensors: Dict[str, DType] = {}
    for t in program.tensors:
        if t.dtype is not None:
            tensors[t.name] = t.dtype
        elif t.name in passed:
            tensors[t.name] = passed[t.name]
    undeclared_floats = {t.name: passed[t.name] for t in program.tensors
                         if t.dtype is None and t.name in passed and passed[t.name].is_float}
    if len(set(undeclared_floats.values())) > 1:
        listing = ", ".join(f"{k} is {v.numpy}" for k, v in undeclared_floats.items())
        raise ArgumentError(f"the arrays of one kernel must share a float type unless declared ({listing}); "
                            f"convert one explicitly (e.g. .astype(np.float32)) or declare the types")
    floats = [d for d in tensors.values() if d.is_float]
    # Without float arrays, undeclared scalars and outputs of literals are float64, like float
    # literals: float32 would round an integer kernel's `A[i] * alpha` past 2**24.
    kernel_float = floats[0] if floats else f64
    for d in floats[1:]:
        kernel_float = promote(kernel_float, d)
    scalars = {s.name: (s.dtype if s.dtype is not None else kernel_float) for s in program.scalars}
    weak = program.frontend == "python"
    # A float literal next to an integer: the kernel's float in Einstein notation (as Halide's
    # literals); a Python float, float64, in a loop kernel (`i * 0.1`, numpy's `A_int32[i] * 0.5`).
    literal_float = kernel_float if floats and not weak else f64
    weak_scalars = frozenset(s.name for s in program.scalars if s.weak)
    typing = Typing(tensors, scalars, kernel_float, literal_float, weak, weak_scalars)
    for _ in range(len(program.statements) + 1):
        changed = False
        for st in program.statements:
            name = st.target.tensor
            if name in tensors:
                continue
            if any(a.tensor not in tensors for a in st.value.accesses()):
                continue
            t = typing.type_of(st.value, None)
            if t is None:
                continue
            if t == BOOL:
                raise ParseError(f"statement `{st.text}` stores a condition into {name}, whose type is not "
                                 f"declared; write select(cond, 1.0, 0.0), or declare {name}", st.location)
            tensors[name] = t
            changed = True
        if not changed:
            break
    for t in program.tensors:
        if t.name not in tensors:
            if t.role in ("input", "inout") and require_inputs:
                raise ArgumentError(f"array {t.name} is missing: the kernel reads it, so pass it as "
                                    f"{t.name}=<numpy array>")
            tensors[t.name] = kernel_float
    typing = Typing(tensors, scalars, kernel_float, literal_float, weak, weak_scalars)
    _check_passed_integer_results(program, passed, typing)
    return typing


def _check_passed_integer_results(program: Program, passed: Mapping[str, DType], typing: Typing) -> None:
    """An undeclared result passed as an integer array must not receive float values: nothing is
    cast silently at the boundary (`np.matmul(a, b, out=c_int)` refuses the same cast).  A
    declared integer result takes them truncated, as asked."""
    floats = _float_sources(program, passed, typing)
    for t in program.tensors:
        dtype = passed.get(t.name)
        if t.dtype is not None or t.role not in ("output", "inout") or not is_integer(dtype):
            continue
        for st in program.statements:
            value = typing.type_of(st.value, None) if st.target.tensor == t.name else None
            if value is not None and value.is_float and _reads_floats(st.value, floats, typing):
                raise ArgumentError(f"{t.name} is {dtype.numpy_name}, but the kernel stores {value.numpy_name} "
                                    f"values into it (`{st.text or st.name}`); pass a {value.numpy_name} array "
                                    f"(numpy refuses this cast too), or declare {t.name}=pc.{dtype.name}[...] to store "
                                    f"them truncated")


def _reads_floats(e: Expr, floats: Set[str], typing: Typing) -> bool:
    """Whether `e` computes with float data the caller gave (a float array, a float literal or
    scalar) or makes floats of integers (`exp(A[i])`, `A[i] / 2`); not a float type that only a
    default chose, as for an intermediate of `1`s."""
    for n in e.walk():
        if isinstance(n, Access) and n.tensor in floats:
            return True
        if _float_literal(n) or (isinstance(n, ScalarRef) and typing.scalars.get(n.name, BOOL).is_float):
            return True
        if isinstance(n, Call) and n.fn in _FLOAT_FUNCTIONS or isinstance(n, Binary) and n.op == "/":
            return True
    return False


#: Functions whose value is a float whatever their operands (`floor`/`ceil`/`abs` keep an integer's type).
_FLOAT_FUNCTIONS = frozenset({"exp", "log", "sqrt", "tanh", "sin", "cos"})


def _float_sources(program: Program, passed: Mapping[str, DType], typing: Typing) -> Set[str]:
    """Tensors that hold float data the caller gave: declared or passed float arrays, and the
    intermediates computed from them."""
    found = {t.name for t in program.tensors if (t.dtype or passed.get(t.name) or BOOL).is_float}
    for _ in range(len(program.statements) + 1):
        more = {st.target.tensor for st in program.statements
                if st.target.tensor not in found and _reads_floats(st.value, found, typing)}
        if not more:
            break
        found |= more
    return found
