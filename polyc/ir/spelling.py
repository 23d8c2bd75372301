"""An injective ASCII spelling of any name, shared by isl naming (`poly.islutil.isl_name`) and C
naming (`codegen.names`): it lives in the IR layer so that neither reaches up to the other."""
from __future__ import annotations


def ascii_spelling(name: str) -> str:
    """An injective ASCII spelling of any string: letters and digits kept, `_` doubled, any other
    character as `_<hex>_` (so `_` is always followed by `_` or a hex digit)."""
    out = []
    for ch in name:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif ch == "_":
            out.append("__")
        else:
            out.append(f"_{ord(ch):x}_")
    return "".join(out)
