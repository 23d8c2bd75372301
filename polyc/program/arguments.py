"""A program's call interface: arrays bound to its parameters and checked, results handed back.

A program is called like the Python function it was traced from (`mlp(x, w1, b1=b1, w2=w2)`), so
positional arrays bind in parameter order; each array is checked against the parameter's declared
element type, and must be C-contiguous (the message then names the program's parameter, not an
operator's).  Results come back as the function returned them: one array, a tuple or a dict.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from ..errors import ArgumentError
from ..ir import DType
from ..runtime.dlpack import contiguous_hint, host_view
from ..runtime.cuda_arrays import is_device_array
from .device import check_device_inputs, stand_in


@dataclass(frozen=True)
class ProgramArguments:
    """Program `name`'s parameters (`inputs`, their element types in `dtypes`, None: any, their
    ranks in `ranks`), its target, and its results: (returned name, tensor) pairs, returned as
    `kind` ("single", "tuple" or "dict")."""

    name: str
    inputs: Tuple[str, ...]
    dtypes: Tuple[Optional[DType], ...]
    target: str
    outputs: Tuple[Tuple[str, str], ...]
    kind: str
    #: the declared rank of each input
    ranks: Tuple[int, ...]

    def bind(self, args: tuple, arrays: Dict[str, Any]) -> Dict[str, Any]:
        """Positional arrays named after the traced function's parameters, as Python binds them."""
        if not args:
            return arrays
        if len(args) > len(self.inputs):
            raise ArgumentError(f"program {self.name} takes {len(self.inputs)} arrays "
                                f"({', '.join(self.inputs)}), {len(args)} given")
        named = dict(zip(self.inputs, args))
        twice = sorted(set(named) & set(arrays))
        if twice:
            raise ArgumentError(f"program {self.name} got {', '.join(twice)} both by position and by name")
        return {**named, **arrays}

    def check(self, arrays: Mapping[str, Any]) -> Dict[str, Any]:
        """The arrays by parameter, each checked (a device array by a host stand-in of its shape)."""
        unknown = sorted(set(arrays) - set(self.inputs))
        if unknown:
            raise ArgumentError(f"program {self.name} has no parameter {', '.join(unknown)}")
        env: Dict[str, Any] = {}
        for name, want, rank in zip(self.inputs, self.dtypes, self.ranks):
            if name not in arrays:
                raise ArgumentError(f"missing array argument {name} of program {self.name}")
            a = original = arrays[name]
            if getattr(a, "__polyc_traced__", False):     # a program called inside another one
                raise a.refused_as_array(f"program {self.name}'s argument {name}")
            if is_device_array(a):
                check_device_inputs(self.target, name, a)
                a = stand_in(name, a)
            else:
                a = host_view(name, a)      # a PyTorch CPU tensor, a JAX CPU array: its memory, viewed
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"argument {name} must be a numpy array, got {type(a).__name__}")
            if not a.flags.c_contiguous:
                raise ArgumentError(f"argument {name} of program {self.name} is not C-contiguous (a transposed, "
                                    f"strided or Fortran-order array); use {contiguous_hint(name, original)}")
            if want is not None and a.dtype != want.numpy:
                raise ArgumentError(f"array {name} has dtype {a.dtype}, program {self.name} declares {want.name}")
            if a.ndim != rank:
                raise ArgumentError(f"array {name} of program {self.name} must have {rank} dimension(s), got "
                                    f"shape {a.shape}")
            env[name] = a
        undeclared = {n: env[n].dtype for n, want in zip(self.inputs, self.dtypes)
                      if want is None and env[n].dtype.kind == "f"}
        if len(set(undeclared.values())) > 1:     # as in one kernel; said here, with the program's names
            listing = ", ".join(f"{n} is {d}" for n, d in undeclared.items())
            raise ArgumentError(f"the float arrays of program {self.name} must share one float type unless "
                                f"declared ({listing}); convert one explicitly (e.g. .astype(np.float32)) "
                                f"or declare the types")
        return env

    def result(self, env: Mapping[str, Any]) -> Any:
        """The returned arrays; a tensor returned under several names (returned twice, two equal
        computations shared, or adjoints that are one) is a copy of its own under each later one."""
        seen: set = set()

        def own(p: str) -> Any:
            a = env[p]
            if p in seen:
                return a.copy()
            seen.add(p)
            return a
        if self.kind == "dict":
            return {n: own(p) for n, p in self.outputs}
        if len(self.outputs) == 1 and self.kind == "single":
            return env[self.outputs[0][1]]
        return tuple(own(p) for _, p in self.outputs)
