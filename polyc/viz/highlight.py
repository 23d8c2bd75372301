"""Minimal syntax highlighting of generated C/CUDA as HTML spans (no external dependencies).

One regular expression splits the source into comments, preprocessor lines, strings, numbers,
words and everything else; each token is HTML-escaped and wrapped in a span with a class
(`pc-kw`, `pc-type`, `pc-num`, `pc-com`, `pc-pp`, `pc-str`) and an inline colour, so it reads the
same in Jupyter (which may drop `<style>` blocks of untrusted output) and in a saved page.
"""
from __future__ import annotations

import html
import re
from typing import List

KEYWORDS = frozenset("""
    for if else while do return break continue switch case default goto sizeof typedef struct
    static inline extern const restrict volatile register __restrict__ __global__ __device__
    __host__ __shared__ __constant__ __forceinline__ __launch_bounds__ extern
""".split())

TYPES = frozenset("""
    void char short int long float double signed unsigned bool size_t ptrdiff_t
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t dim3
""".split())

BUILTINS = frozenset("""
    threadIdx blockIdx blockDim gridDim __syncthreads pc_min pc_max pc_floord
    min max floor ceil sqrt exp log fabs pow
""".split())

STYLES = {
    "pc-kw": "color:#0000c0;font-weight:bold",
    "pc-type": "color:#00808a",
    "pc-builtin": "color:#7a3e9d",
    "pc-num": "color:#a0522d",
    "pc-com": "color:#6a737d;font-style:italic",
    "pc-pp": "color:#8a6d00",
    "pc-str": "color:#1a7f37",
}

_TOKEN = re.compile(r"""
    (?P<com>//[^\n]*|/\*.*?\*/)
  | (?P<pp>^[ \t]*\#[^\n]*)
  | (?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<num>\b(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[fFuUlL]*\b)
  | (?P<word>[A-Za-z_]\w*)
""", re.X | re.S | re.M)


def _span(cls: str, text: str) -> str:
    return f'<span class="{cls}" style="{STYLES[cls]}">{html.escape(text)}</span>'


def highlight_c(source: str) -> str:
    """`source` as escaped HTML with highlighted tokens (put it inside a `<pre>`)."""
    out: List[str] = []
    pos = 0
    for m in _TOKEN.finditer(source):
        if m.start() > pos:
            out.append(html.escape(source[pos:m.start()]))
        text = m.group(0)
        kind = m.lastgroup
        if kind == "com":
            out.append(_span("pc-com", text))
        elif kind == "pp":
            # `#pragma omp parallel for` and `#include <...>` both read as preprocessor lines.
            out.append(_span("pc-pp", text))
        elif kind == "str":
            out.append(_span("pc-str", text))
        elif kind == "num":
            out.append(_span("pc-num", text))
        elif text in KEYWORDS:
            out.append(_span("pc-kw", text))
        elif text in TYPES:
            out.append(_span("pc-type", text))
        elif text in BUILTINS:
            out.append(_span("pc-builtin", text))
        else:
            out.append(html.escape(text))
        pos = m.end()
    out.append(html.escape(source[pos:]))
    return "".join(out)
