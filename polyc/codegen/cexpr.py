"""Printing IR scalar expressions and accesses as C (shared by the C and CUDA emitters).

Operators and functions follow numpy's semantics, not C's (README "Types"): `max`/`min` (calls and
`max=!`/`min=!` updates) propagate NaN like `np.maximum`/`np.minimum`; `%` and `//` floor like
`np.mod`/`np.floor_divide` (Python's rule) on integers and floats; an integer `%` or `//` by zero
gives 0 and `INT_MIN // -1` wraps, as numpy does, so no input makes generated code trap.  The
printed expressions call small helpers (`expression_helpers`) that every C/CUDA preamble includes,
so that an argument is evaluated once however deeply calls nest.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Tuple


from ..errors import LiteralRangeError, PolycError
from ..ir import (Access, Affine, Binary, Call, Cast, Const, DType, Expr, IndexExpr, Program, ScalarRef, Select,
                  Statement, Unary, i64)
from ..ir.literals import INT_RANGE as _INT_RANGE
from ..ir.literals import integer_literal_fits, literal_location, literal_range_error
from .loop_ast import operand
from .names import INTERNAL
from .typing import BOOL, Typing, is_integer, literal_type

_FLOAT_FN = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "abs": "fabs", "floor": "floor",
             "ceil": "ceil", "sin": "sin", "cos": "cos", "fmax": "fmax", "fmin": "fmin", "pow": "pow"}
_INT_LIMITS = {"i32": ("INT32_MIN", "INT32_MAX"), "i64": ("INT64_MIN", "INT64_MAX"),
               "u8": ("0", "UINT8_MAX"), "u16": ("0", "UINT16_MAX")}

#: (polyc type name, C type, suffix of its <math.h> functions) for which helpers are printed.
_HELPER_TYPES = (("f32", "float", "f"), ("f64", "double", ""), ("i32", "int32_t", ""), ("i64", "int64_t", ""),
                 ("u8", "uint8_t", ""), ("u16", "uint16_t", ""))


def expression_helpers(qualifier: str) -> str:
    """C definitions of the helpers printed expressions call, each declared `qualifier`
    (`static inline` for C, `static __device__ __forceinline__` for CUDA).

    - `pc_max_<t>(a, b)` / `pc_min_<t>`: NaN if either operand is NaN (`np.maximum`).  The
      form `b != b ? b : (b > a ? b : a)` keeps the dependence on `a` (an accumulator in a
      `max=!` reduction) to one compare-and-select, which gcc turns into `vmaxps` and vectorises
      across independent accumulators; `fmax` is a library call that ignores NaN.
    - `pc_mod_<t>` / `pc_floordiv_<t>`: Python's and numpy's floor semantics.  Floats follow
      numpy's `npy_divmod` (so `1.0 // 0.1` is 9.0 as in Python, not `floor(1.0 / 0.1)`); a float
      divisor 0 gives NaN or +-inf as numpy does; an integer divisor 0 gives 0, and the
      quotient `INT_MIN // -1` wraps to `INT_MIN`, without trapping.
    """
    q = qualifier
    out = []
    for name, ct, sfx in _HELPER_TYPES:
        if name.startswith("f"):
            out += [
                f"{q} {ct} pc_max_{name}({ct} pc_a, {ct} pc_b) {{ return (pc_b != pc_b) ? pc_b : (pc_b > pc_a ? pc_b : pc_a); }}",
                f"{q} {ct} pc_min_{name}({ct} pc_a, {ct} pc_b) {{ return (pc_b != pc_b) ? pc_b : (pc_b < pc_a ? pc_b : pc_a); }}",
                f"{q} {ct} pc_mod_{name}({ct} pc_a, {ct} pc_b) {{ {ct} pc_r = fmod{sfx}(pc_a, pc_b); "
                f"if (pc_r != 0) {{ if ((pc_b < 0) != (pc_r < 0)) pc_r += pc_b; }} "
                f"else pc_r = copysign{sfx}(0.0{sfx}, pc_b); return pc_r; }}",
                f"{q} {ct} pc_floordiv_{name}({ct} pc_a, {ct} pc_b) {{ if (pc_b == 0) return pc_a / pc_b; "
                f"{ct} pc_r = fmod{sfx}(pc_a, pc_b), pc_d = (pc_a - pc_r) / pc_b; "
                f"if (pc_r != 0 && ((pc_b < 0) != (pc_r < 0))) pc_d -= 1; "
                f"if (pc_d == 0) return copysign{sfx}(0.0{sfx}, pc_a / pc_b); "
                f"{ct} pc_f = floor{sfx}(pc_d); return (pc_d - pc_f > 0.5{sfx}) ? pc_f + 1 : pc_f; }}",
            ]
        elif name.startswith("u"):   # unsigned: C's / and % already floor; only a zero divisor needs care
            out += [
                f"{q} {ct} pc_max_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b > pc_a ? pc_b : pc_a; }}",
                f"{q} {ct} pc_min_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b < pc_a ? pc_b : pc_a; }}",
                f"{q} {ct} pc_mod_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b == 0 ? 0 : ({ct})(pc_a % pc_b); }}",
                f"{q} {ct} pc_floordiv_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b == 0 ? 0 : ({ct})(pc_a / pc_b); }}",
            ]
        else:
            ut = "uint32_t" if name == "i32" else "uint64_t"
            out += [
                f"{q} {ct} pc_max_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b > pc_a ? pc_b : pc_a; }}",
                f"{q} {ct} pc_min_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b < pc_a ? pc_b : pc_a; }}",
                f"{q} {ct} pc_mod_{name}({ct} pc_a, {ct} pc_b) {{ if (pc_b == 0 || pc_b == -1) return 0; "
                f"{ct} pc_r = pc_a % pc_b; return (pc_r != 0 && ((pc_r < 0) != (pc_b < 0))) ? pc_r + pc_b : pc_r; }}",
                f"{q} {ct} pc_floordiv_{name}({ct} pc_a, {ct} pc_b) {{ if (pc_b == 0) return 0; "
                f"if (pc_b == -1) return ({ct})(({ut})0 - ({ut})pc_a); "
                f"{ct} pc_d = pc_a / pc_b; return (pc_a % pc_b != 0 && ((pc_a < 0) != (pc_b < 0))) ? pc_d - 1 : pc_d; }}",
            ]
    out += _ipow_helpers(q) + _float_to_int_helpers(q)
    for name, ct, _ in _HELPER_TYPES:   # Python's builtins: the first operand unless b compares past it
        out += [f"{q} {ct} pc_pymax_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b > pc_a ? pc_b : pc_a; }}",
                f"{q} {ct} pc_pymin_{name}({ct} pc_a, {ct} pc_b) {{ return pc_b < pc_a ? pc_b : pc_a; }}"]
    return "\n".join(out) + "\n"


def _float_to_int_helpers(q: str) -> list:
    """`pc_f2i_<t>(x)`: a float converted to an integer type as numpy does on x86 (truncated; NaN
    or out of range gives the type's minimum, through int32 for the narrow unsigned types), on
    every target: C leaves such a conversion undefined, and a GPU saturates instead."""
    return [
        f"{q} int32_t pc_f2i_i32(double pc_x) {{ return (pc_x > -2147483649.0 && pc_x < 2147483648.0) "
        f"? (int32_t)pc_x : (int32_t)(-2147483647 - 1); }}",
        f"{q} int64_t pc_f2i_i64(double pc_x) {{ return (pc_x >= -9223372036854775808.0 && "
        f"pc_x < 9223372036854775808.0) ? (int64_t)pc_x : (int64_t)(-9223372036854775807LL - 1); }}",
        f"{q} uint8_t pc_f2i_u8(double pc_x) {{ return (uint8_t)(uint32_t)pc_f2i_i32(pc_x); }}",
        f"{q} uint16_t pc_f2i_u16(double pc_x) {{ return (uint16_t)(uint32_t)pc_f2i_i32(pc_x); }}",
    ]


def _ipow_helpers(q: str) -> list:
    """`pc_ipow_<t>(a, b)`: exact integer power by squaring in unsigned arithmetic (wraps like
    numpy's `np.power`, no libm double round trip).  A negative exponent (only reachable at run
    time: a constant one is refused) gives the exact result truncated: 0 unless |a| is 1."""
    out = []
    for name, ct, _ in _HELPER_TYPES:
        if name.startswith("f"):
            continue
        ut = "uint64_t" if name == "i64" else "uint32_t"
        neg = "" if name.startswith("u") else \
            "if (pc_b < 0) return pc_a == 1 ? 1 : (pc_a == -1 ? ((pc_b & 1) ? -1 : 1) : 0); "
        out.append(f"{q} {ct} pc_ipow_{name}({ct} pc_a, {ct} pc_b) {{ {neg}{ut} pc_r = 1, pc_x = ({ut})pc_a; "
                   f"while (pc_b) {{ if (pc_b & 1) pc_r *= pc_x; pc_x *= pc_x; pc_b >>= 1; }} "
                   f"return ({ct})pc_r; }}")
    return out


def literal(value, dtype: DType) -> str:
    """A C literal of `dtype` (floats keep their type: `0.5f` for float32)."""
    if not integer_literal_fits(value, dtype):
        raise literal_range_error(value, dtype)
    if dtype.is_float:
        v = float(value)
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        if math.isnan(v):
            return "NAN"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return text + ("f" if dtype.bits == 32 else "")
    if isinstance(value, float) and math.isinf(value):
        lo, hi = _INT_LIMITS.get(dtype.name, ("INT64_MIN", "INT64_MAX"))
        return hi if value > 0 else lo
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and not value.is_integer():
        raise PolycError(f"literal {value} in an integer expression")
    lo, hi = _INT_RANGE.get(dtype.name, _INT_RANGE["i64"])
    if int(value) == lo:      # `-2147483648` is `-(2147483648)` in C: a wider type
        return _INT_LIMITS[dtype.name][0] if dtype.name in _INT_LIMITS else str(int(value))
    return str(int(value))


class CExprPrinter:
    """Prints one statement's expressions, with original iterators replaced by loop expressions."""

    def __init__(self, typing: Typing, index_text: Dict[str, str],
                 access_text: Callable[[Access, "CExprPrinter"], str], names=None):
        self.typing = typing
        self.index_text = index_text
        self._access_text = access_text
        #: `polyc.codegen.names.CNames` (or anything with `.size(name)` and `.scalar(name)`): how
        #: sizes and scalars are spelled; None prints them as written.
        self.names = names

    def _size(self, name: str) -> str:
        return self.names.size(name) if self.names is not None else name

    def affine(self, a: Affine) -> str:
        parts = []
        for v, c in a.terms:
            term = self.index_text[v] if v in self.index_text else self._size(v)
            term = operand(term)
            parts.append(term if c == 1 else f"-{term}" if c == -1 else f"{c} * {term}")
        if a.constant or not parts:
            parts.append(str(a.constant))
        text = " + ".join(parts)
        return text.replace("+ -", "- ")

    def access(self, acc: Access) -> str:
        return self._access_text(acc, self)

    def expr(self, e: Expr, want: Optional[DType]) -> str:
        """C text of `e` evaluated in type `want` (literals adopt it)."""
        t = self.typing
        if t.python_number(e):
            own = t.python_type(e)          # a loop kernel's Python number: computed as Python does,
            if want is not None and want != BOOL and want != own:        # then converted once
                return f"(({want.c_name})({self._expr(e, own)}))"
            want = own
        return self._expr(e, want)

    def _expr(self, e: Expr, want: Optional[DType]) -> str:
        t = self.typing
        if isinstance(e, Const):
            if e.dtype is None and isinstance(e.value, float) and math.isfinite(e.value) \
                    and want is not None and want != BOOL and not want.is_float:
                want = t.literal_float   # a weak float literal stays a float (C converts on use)
            return literal(e.value, e.dtype or want or t.default_float)
        if isinstance(e, ScalarRef):
            name = self.names.scalar(e.name) if self.names is not None else e.name
            own, used = t.scalars.get(e.name), t.type_of(e, want)
            if own is not None and used is not None and used != own and used.is_float:   # a Python float as float32
                return f"(({used.c_name})({name}))"
            return name
        if isinstance(e, IndexExpr):
            if want is not None and want.is_float:
                hoisted = getattr(self.names, "float_sizes", {}).get((e.value, want.name))
                if hoisted is not None:
                    return hoisted
            if t.weak_indices and is_integer(want) and want.bits < 64:
                return f"(({want.c_name})({self.affine(e.value)}))"   # a Python int next to int32 data
            return f"({self.affine(e.value)})"
        if isinstance(e, Access):
            return self.access(e)
        if isinstance(e, Cast):
            folded = _folded_cast(e, t)
            if folded is not None:     # `uint8(-1)`: C's conversion of such a constant is undefined
                return literal(folded, e.dtype)
            operand = self.expr(e.operand, None)
            source = t.type_of(e.operand, None)      # None: literals alone, printed in the float type
            from_float = source is None or source.is_float
            if is_integer(e.dtype) and from_float:
                return f"pc_f2i_{e.dtype.name}({operand})"
            return f"(({e.dtype.c_name})({operand}))"
        if isinstance(e, Unary):
            if e.op == "-" and _is_number(e.operand):     # `-2147483648` fits int32, as in numpy
                return f"({self.expr(Const(-e.operand.value, e.operand.dtype), want)})"
            inner = self.expr(e.operand, want)
            if e.op == "not":
                return f"(!{inner})"
            own = t.type_of(e, want)
            if is_integer(own):      # numpy wraps (-uint8(199) is 57, -INT_MIN is INT_MIN); C promotes or traps
                return f"({wrapping('0', '-', inner, own.c_name)})"
            return f"(-({inner}))" if inner.startswith("-") else f"(-{inner})"   # not `--1.0f`
        if isinstance(e, Binary):
            if e.op in ("and", "or"):
                op = "&&" if e.op == "and" else "||"
                return f"({self.expr(e.lhs, None)} {op} {self.expr(e.rhs, None)})"
            common = t.operation_type(e, want)
            if e.op in ("<", "<=", ">", ">=", "==", "!="):
                return f"({self.expr(e.lhs, common)} {e.op} {self.expr(e.rhs, common)})"
            lhs, rhs = self.expr(e.lhs, common), self.expr(e.rhs, common)
            if _needs_widening(common, t.type_of(e.lhs, common), t.type_of(e.rhs, common)):
                lhs = f"(({common.c_name})({lhs}))"     # C would compute int32 * float in float
            if e.op == "/" and common is not None and not common.is_float:
                return f"((double)({lhs}) / (double)({rhs}))"
            if e.op in ("%", "//"):
                return f"pc_{'mod' if e.op == '%' else 'floordiv'}_{common.name}({lhs}, {rhs})"
            if is_integer(common):   # wrapping as numpy's, never C's int promotion or overflow
                return f"({wrapping(lhs, e.op, rhs, common.c_name)})"
            return f"({lhs} {e.op} {rhs})"
        if isinstance(e, Select):
            rt = t.type_of(e, want)
            return f"({self.expr(e.cond, None)} ? {self.expr(e.if_true, rt)} : {self.expr(e.if_false, rt)})"
        if isinstance(e, Call):
            rt = t.type_of(e, want) or want or literal_type(*e.args)
            args = [self.expr(a, rt) for a in e.args]
            if e.fn == "stop_gradient":
                return args[0]
            if e.fn == "pow" and rt is not None and rt != BOOL and not rt.is_float:
                return f"pc_ipow_{rt.name}({args[0]}, {args[1]})"
            if e.fn in ("max", "min", "pymax", "pymin") and rt is not None and rt != BOOL:
                return f"pc_{e.fn}_{rt.name}({args[0]}, {args[1]})"
            if e.fn == "pow" and rt is not None and rt.is_float and isinstance(e.args[1], Const) \
                    and e.args[1].value == 0.5:
                # numpy computes x ** 0.5 as a square root: nan at -inf and -0.0 at -0.0, where
                # C's pow gives +inf and +0.0 (and gcc's vector pow numpy's answers)
                return f"{_fn('sqrt', rt)}({args[0]})"
            if rt is not None and rt.is_float:    # integer operands converted explicitly: CUDA's
                # C++ overloads of `exp(int)` are host functions, which nvcc refuses in a kernel
                args = [f"(({rt.c_name})({x}))" if is_integer(t.type_of(a, rt)) else x for a, x in zip(e.args, args)]
                return f"{_fn(_FLOAT_FN[e.fn], rt)}({', '.join(args)})"
            if e.fn == "abs":
                return f"llabs({args[0]})"
            if e.fn in ("floor", "ceil") and is_integer(t.type_of(e.args[0], rt)):
                return args[0]     # an integer already (and CUDA's `floor(int)` is host-only)
            if e.fn in ("fmax", "fmin"):
                return f"pc_{e.fn[1:]}_{(rt or i64).name}({args[0]}, {args[1]})"
            return f"{e.fn}({', '.join(args)})"
        raise PolycError(f"cannot print expression {e!r}")

    def statement(self, st: Statement) -> str:
        """The statement as one C assignment; a literal that does not fit its type is refused with
        the statement's source position (`LiteralRangeError`)."""
        try:
            return self._statement(st)
        except LiteralRangeError as err:
            if err.location is not None or err.literal is None:
                raise
            raise literal_range_error(err.literal, err.dtype, literal_location(st, err.literal)) from None

    def _statement(self, st: Statement) -> str:
        dtype = self.typing.tensors[st.target.tensor]
        return assignment(self.typing, st, self.access(st.target), self.expr(st.value, dtype))


def assignment(typing: Typing, st: Statement, target: str, value: str) -> str:
    """`st` as a C assignment of the printed `value` (in the target's type, `CExprPrinter.expr`)
    to the C lvalue `target` (the statement's element, or a register holding it): a float stored
    into an integer converts as numpy does (`pc_f2i_*`), after every step of an update; integer
    updates wrap; max/min propagate NaN."""
    dtype = typing.tensors[st.target.tensor]
    value_type = typing.type_of(st.value, dtype)
    to_int = is_integer(dtype) and value_type is not None and value_type.is_float
    if st.update is None:
        return f"{target} = {f'pc_f2i_{dtype.name}({value})' if to_int else value};"
    if st.update in ("+", "*") and to_int:     # in the float type, then converted (README "Types")
        combine = typing.promote(dtype, value_type)
        if _needs_widening(combine, dtype, value_type):   # loop kernels' int32 += f32 combines in double
            target_value = f"(({combine.c_name})({target}))"
        else:
            target_value = target
        return f"{target} = pc_f2i_{dtype.name}({target_value} {st.update} {value});"
    if st.update in ("+", "*"):
        return wrapping_update(target, st.update, value, dtype.c_name, value_type)
    return f"{target} = pc_{st.update}_{dtype.name}({target}, {value});"


def _needs_widening(common: Optional[DType], a: Optional[DType], b: Optional[DType]) -> bool:
    """Whether C's own conversions would compute operands of types `a` and `b` in a narrower type
    than `common`: a float64 operation of which neither operand is a float64 (`promote_numpy`'s
    int32 * float32, which C computes in float).  Converting one operand then suffices."""
    return common is not None and common.is_float and common.bits == 64 and \
        not any(x is not None and x.is_float and x.bits == 64 for x in (a, b))


#: The unsigned C type integer arithmetic is done in (wrapping, as numpy's).
_UNSIGNED_C = {"int32_t": "uint32_t", "int64_t": "uint64_t", "uint8_t": "uint32_t", "uint16_t": "uint32_t"}


def wrapping(a: str, op: str, b: str, ctype: str) -> str:
    """`a op b` for integers of C type `ctype`, wrapping as numpy does: computed in an unsigned
    type and converted back.  A signed overflow is undefined in C (gcc may assume it never
    happens), and C computes uint8/uint16 operands in `int` (`1 - 3` is -2; 65535 * 65535
    overflows it).  Other types as C computes them."""
    unsigned = _UNSIGNED_C.get(ctype)
    if unsigned is None:
        return f"{a} {op} {b}"
    return f"({ctype})(({unsigned})({a}) {op} ({unsigned})({b}))"


def wrapping_update(target: str, op: str, value: str, ctype: str, value_type: Optional[DType] = None) -> str:
    """`target op= value`, wrapping (`wrapping`) where the value is an integer too; with a float
    value, C's own compound assignment (converted to `target`'s type after the step)."""
    if ctype not in _UNSIGNED_C or (value_type is not None and not is_integer(value_type)):
        return f"{target} {op}= {value};"
    return f"{target} = {wrapping(target, op, value, ctype)};"


def _folded_cast(e: Cast, t: Typing):
    """The value of a conversion of a literal (`int32(3e9)`, `uint8(-1)`), computed as numpy computes
    it from the literal's own type (`literal_type`: int64 for an integer, as `kernel.reference`
    takes it); None otherwise."""
    operand, sign = e.operand, 1
    if isinstance(operand, Unary) and operand.op == "-":
        operand, sign = operand.operand, -1
    if not _is_number(operand) or operand.dtype is not None:
        return None
    import numpy as np
    with np.errstate(all="ignore"):
        value = np.asarray(sign * operand.value, dtype=literal_type(operand).numpy).astype(e.dtype.numpy)
    return value.item()


def _is_number(e: Expr) -> bool:
    """A numeric literal (not a boolean)."""
    return isinstance(e, Const) and not isinstance(e.value, bool)


def _fn(name: str, dtype: DType) -> str:
    return name + "f" if dtype.bits == 32 and dtype.is_float else name


def float_sizes(program: Program, typing: Typing) -> Dict[Tuple[Affine, str], str]:
    """A C constant for every size-only index value the statements use (`X[i, j] / N`), in every
    float type of the kernel, for `CNames.float_sizes`: the C generator converts each once at the
    top of each function, and `CExprPrinter` reads it there instead of converting in the loop,
    where gcc does not vectorise an int64 -> float conversion without AVX-512 (layernorm's
    backward ran its row reductions one element at a time)."""
    values: List[Affine] = []
    for st in program.statements:
        for e in st.value.walk():
            if isinstance(e, IndexExpr) and e.value.variables and set(e.value.variables) <= set(program.sizes) \
                    and e.value not in values:
                values.append(e.value)
    floats = sorted({d.name for d in list(typing.tensors.values()) + list(typing.scalars.values())
                     if d is not None and d.is_float})
    return {(v, f): f"{INTERNAL}fsize{k}_{f}" for k, v in enumerate(values) for f in floats}
