"""The one place where user names become C identifiers.

Every name a user writes (tensor, size, scalar, loop index, kernel) reaches generated C, CUDA and
emulation C only through this module.  Each kind of name gets its own prefix, so the mapping is
injective and no user name can equal a C keyword, a macro (`NAN`), a libm or OpenMP function
(`sqrtf`, `omp_get_thread_num`), `main`, or one of polyc's own identifiers:

    tensor `A`        -> `t_A`        (the indexable view of its data)
    its data pointer  -> `d_A`        (the flat pointer the caller passes)
    size `M`          -> `n_M`
    scalar `alpha`    -> `s_alpha`
    loop / index `k`  -> `i_k`

polyc's own helpers and temporaries all start with `pc_` (no user prefix starts with `p`), and the
exported kernel symbol with `polyc_`.  The user's name stays readable inside the mangled one.  A name
that is not an ASCII identifier (`α`) is spelled in ASCII behind a second marker (`tu_`, `nu_`,
...): letters and digits as they are, `_` doubled, any other character as `_<hex code point>_`.

The loop AST keeps isl's names for loops and sizes (`polyc.poly.islutil.isl_name`); `ids` turns those
into the C identifiers above when an emitter prints them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple

from ..ir.spelling import ascii_spelling  # noqa: F401  (re-exported; isl naming needs it too)
from ..poly.islutil import isl_name

if TYPE_CHECKING:
    from ..ir import Affine, Program
    from ..schedule.schedule import Schedule

#: Prefix of every identifier polyc itself introduces into generated code.
INTERNAL = "pc_"

#: Kind prefixes of user names (none starts with "p", so no user name enters polyc's namespace).
TENSOR, DATA, SIZE, SCALAR, INDEX = "t", "d", "n", "s", "i"

_ASCII_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def mangle(kind: str, name: str) -> str:
    """The C identifier of user name `name` of `kind` (one of TENSOR, DATA, SIZE, SCALAR, INDEX).

    ASCII identifiers read `<kind>_<name>`; any other name `<kind>u_<ascii spelling>`.  Injective: the
    kind is the first letter, the character after it tells which of the two spellings follows."""
    if _ASCII_IDENT.match(name):
        return f"{kind}_{name}"
    return f"{kind}u_{ascii_spelling(name)}"


def kernel_symbol(kernel_name: str) -> str:
    """The exported C symbol of a kernel (`polyc_matmul`); helpers append `_loop0`, `_k1`, ..."""
    return "polyc_" + (kernel_name if _ASCII_IDENT.match(kernel_name) else "u_" + ascii_spelling(kernel_name))


@dataclass(frozen=True)
class CNames:
    """C identifiers for one kernel's names, and for the isl ids its loop AST uses.

    `ids` maps an isl id of the loop AST (a loop's or a size's `isl_name`) to its C identifier;
    loops and sizes never share a name (schedule primitives refuse such loop names), so one table
    serves both.  Ids polyc introduces itself (`pc_...`) print as they are.
    """

    ids: Mapping[str, str] = field(default_factory=dict)
    #: (size-only affine value, float dtype name) -> the C constant holding it converted once at the
    #: top of each function (`cexpr.float_sizes`); empty where the target declares none (CUDA).
    float_sizes: Mapping[Tuple[Affine, str], str] = field(default_factory=dict)

    @staticmethod
    def tensor(name: str) -> str:
        """Tensor `name` as the C emitter indexes it (`t_A`, a pointer to a variable-length array;
        CUDA indexes the flat data pointer instead)."""
        return mangle(TENSOR, name)

    @staticmethod
    def data(name: str) -> str:
        """The flat data pointer of tensor `name`, as the caller passes it (`d_A`)."""
        return mangle(DATA, name)

    @staticmethod
    def size(name: str) -> str:
        return mangle(SIZE, name)

    @staticmethod
    def scalar(name: str) -> str:
        return mangle(SCALAR, name)

    @staticmethod
    def index(name: str) -> str:
        """A loop or a statement index (both are iteration variables; `i_k`)."""
        return mangle(INDEX, name)

    @staticmethod
    def given(size: str) -> str:
        """The parameter that receives a size compiled in as a constant (its value is ignored)."""
        return f"{INTERNAL}given_{mangle(SIZE, size)}"

    def id(self, isl_id: str) -> str:
        """The C identifier of an isl id of the loop AST."""
        out = self.ids.get(isl_id)
        if out is not None:
            return out
        if isl_id.startswith(INTERNAL):
            return isl_id
        raise KeyError(f"loop-AST id {isl_id!r} has no C name (neither a loop nor a size of this kernel)")

    @staticmethod
    def for_program(program: "Program", schedule: Optional["Schedule"] = None) -> "CNames":
        """The names of `program`'s sizes and, given a schedule, of its loops, keyed by isl id."""
        ids: Dict[str, str] = {isl_name(s): mangle(SIZE, s) for s in program.sizes}
        if schedule is not None:
            for k, (d, it) in enumerate(zip(schedule.dims, schedule.iterator_names())):
                # A scalar (ordering) dimension can still become a loop (one that runs a statement's
                # instances in two groups, say): its iterator is polyc's own.
                ids[it] = mangle(INDEX, d.name) if d.name is not None else f"{INTERNAL}s{k}"
        return CNames(ids)
