"""Runtime for the C target: compile generated C (with an on-disk cache), load it, bind calls."""
from .arguments import BoundCall, bind_arguments, passed_dtypes, size_symbols
from .cache import cache_dir, cache_key
from .compiler import command_flags, compile_c, compiler_version, resolve_compiler
from .loader import KernelFunction, load_function, load_library
from ..codegen.signature import KernelParam, KernelSignature

__all__ = [
    "BoundCall", "bind_arguments", "passed_dtypes", "size_symbols",
    "cache_dir", "cache_key",
    "command_flags", "compile_c", "compiler_version", "resolve_compiler",
    "KernelFunction", "load_function", "load_library",
    "KernelParam", "KernelSignature",
]
