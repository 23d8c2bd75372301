"""Rich HTML views of every stage, for Jupyter's `_repr_html_`.

- `kernel_html(kernel)`: tensors, sizes, the source, statements with their iteration domains,
  and (folded) the dependences and the source-order schedule;
- `dependences_html(deps)`: one table row per dependence: kind, source -> sink, array, distance,
  one concrete pair, the isl relation (and, given a schedule, the loop that carries it);
- `schedule_html(schedule)`: the nested outline of loops with their marks (parallel, vector,
  unroll, block/thread mapping) and the statements at the leaves;
- `compiled_html(compiled)`: target, compile flags, cache path and the highlighted source.

Views only read; every piece of text that comes from a kernel, isl or a compiler is escaped.
Styles are inline so the views look the same in Jupyter, in a saved notebook and in a browser.
"""
from __future__ import annotations

import html
from typing import Any, Iterable, List, Optional, Sequence

from ..display import register_html
from ..ir.text import statement_text
from .highlight import highlight_c
from ..schedule.outline import OutlineNode, mark_label, schedule_outline

_BOX = ("font-family:-apple-system,BlinkMacSystemFont,'Segoe UI',Helvetica,Arial,sans-serif;"
        "font-size:13px;line-height:1.4;border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;"
        "margin:4px 0;max-width:100%;overflow-x:auto")
_TABLE = "border-collapse:collapse;margin:4px 0;font-size:12px"
_TH = "text-align:left;border-bottom:2px solid #d0d7de;padding:2px 8px;background:#f6f8fa"
_TD = "text-align:left;border-bottom:1px solid #eaeef2;padding:2px 8px;vertical-align:top"
_CODE = "font-family:SFMono-Regular,Consolas,'Liberation Mono',Menlo,monospace;font-size:12px"
_PRE = (_CODE + ";background:#f6f8fa;border-radius:4px;padding:6px 8px;margin:4px 0;white-space:pre;"
        "overflow-x:auto")
_MUTED = "color:#57606a"
# Table cells and inline code are the bulk of a view: they are styled once per view by class
# (a view stays readable, just plainer, where a sanitizer drops the <style> block).
_SHEET = ("<style>.polyc-view td.pc-td{" + _TD + "}.polyc-view th.pc-th{" + _TH + "}"
          ".polyc-view code.pc-code-inline{" + _CODE + "}</style>")

KIND_COLORS = {"flow": "#1f6feb", "anti": "#bf8700", "output": "#8250df"}
MARK_COLORS = {"parallel": "#1a7f37", "reduction_parallel": "#1a7f37", "vector": "#0969da",
               "unroll": "#9a6700", "block": "#cf222e", "thread": "#bc4c00"}


def esc(value: Any) -> str:
    """HTML-escaped `str(value)` (quotes included)."""
    return html.escape(str(value), quote=True)


def _code(value: Any) -> str:
    return f'<code class="pc-code-inline">{esc(value)}</code>'


def _badge(text: str, color: str, cls: str = "") -> str:
    return (f'<span class="pc-badge {esc(cls)}" style="display:inline-block;padding:0 6px;margin:0 2px;'
            f'border-radius:10px;font-size:11px;color:white;background:{color}">{esc(text)}</span>')


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str) -> str:
    """A table; `rows` cells are already-escaped HTML."""
    head = "".join(f'<th class="pc-th">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="pc-td">{c}</td>' for c in row) + "</tr>" for row in rows)
    return f'<table class="{esc(cls)}" style="{_TABLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _details(summary: str, body: str, open_: bool = False) -> str:
    return (f'<details{" open" if open_ else ""} style="margin:4px 0"><summary style="cursor:pointer">'
            f'{summary}</summary>{body}</details>')


def _box(cls: str, title: str, body: str) -> str:
    return (f'<div class="polyc-view {esc(cls)}" style="{_BOX}">{_SHEET}<div style="font-weight:600">{title}</div>'
            f'{body}</div>')


def _error(e: BaseException) -> str:
    return f'<div style="color:#cf222e">{esc(type(e).__name__)}: {esc(e)}</div>'


# -- kernel -------------------------------------------------------------------------------------
def _shape_text(shape) -> str:
    if shape is None:
        return "inferred at call"
    return "[" + ", ".join(str(s) for s in shape) + "]" if shape else "scalar"


def kernel_html(kernel, details: bool = True) -> str:
    """A kernel: tensors, sizes, scalars, source, statements with domains; folded deps and schedule."""
    program = kernel.program
    model = kernel.model
    parts: List[str] = []
    tensors = [(_code(t.name), esc(t.role), esc(t.dtype.name if t.dtype else "from the call"),
                _code(_shape_text(t.shape))) for t in program.tensors]
    parts.append(_table(("tensor", "role", "dtype", "shape"), tensors, "pc-tensors"))
    facts = []
    if program.sizes:
        facts.append("sizes " + ", ".join(_code(s) for s in program.sizes))
    if program.scalars:
        facts.append("scalars " + ", ".join(
            _code(f"{s.name}: {s.dtype.name if s.dtype else 'element type'}") for s in program.scalars))
    if facts:
        parts.append(f'<div style="{_MUTED}">{"; ".join(facts)}</div>')
    if program.source:
        parts.append(f'<pre class="pc-source" style="{_PRE}">{esc(program.source.strip())}</pre>')
    rows = []
    for st in program.statements:
        domain = model.domains.get(st.name)
        extra = f' <span style="{_MUTED}">reduction over {esc(", ".join(st.reduction))}</span>' \
            if st.reduction else ""
        rows.append((f"<b>{esc(st.name)}</b>", _code(statement_text(st)) + extra,
                     _code(", ".join(st.iterators) or "-"), _code(domain)))
    parts.append(_table(("statement", "computes", "loops", "iteration domain (isl)"), rows, "pc-statements"))
    if details:
        try:
            deps = kernel.dependences()
            parts.append(_details(f"dependences ({len(deps)})", dependences_html(deps)))
        except Exception as e:  # a view must render even when an analysis fails
            parts.append(_details("dependences (failed)", _error(e)))
        try:
            parts.append(_details("source-order schedule", schedule_html(kernel.schedule())))
        except Exception as e:
            parts.append(_details("schedule (failed)", _error(e)))
    title = (f'kernel {_code(kernel.name)} <span style="font-weight:normal;{_MUTED}">'
             f'({esc(program.frontend)}, {len(program.statements)} statement'
             f'{"s" if len(program.statements) != 1 else ""})</span>')
    return _box("polyc-kernel", title, "".join(parts))


# -- dependences --------------------------------------------------------------------------------
def _instance(statement, coords) -> str:
    if not statement.iterators:
        return statement.name
    return f"{statement.name}[{', '.join(f'{i}={v}' for i, v in zip(statement.iterators, coords))}]"


def _example_text(deps, dep) -> str:
    model = deps.model
    params, src, snk = dep.example(model.context)
    program = model.program
    sizes = ", ".join(f"{k}={v}" for k, v in params.items())
    text = f"{_instance(program.statement(dep.source), src)} → {_instance(program.statement(dep.sink), snk)}"
    return text + (f" ({sizes})" if sizes else "")


def _carried_by(schedule, dep) -> str:
    """Name of the loop that carries `dep` under `schedule` ("-" when only ordering dims do)."""
    from ..schedule.legality import carried_at
    for level, dim in enumerate(schedule.dims):
        if carried_at(schedule, [dep], level):
            return dim.name if dim.name is not None else "-"
    return "-"


def distance_text(dep) -> str:
    """`(0, 0, 1)` for a constant distance, all of them when several references give several
    (`(0, 1), (1, -1)`), `-` when none is constant."""
    ds = getattr(dep, "distances", None)
    if ds is None:
        ds = (dep.distance,) if dep.distance is not None else ()
    return ", ".join("(" + ", ".join(map(str, d)) + ")" for d in ds) or "-"


def dependences_html(deps, schedule=None, examples: bool = True) -> str:
    """The dependences as a table; with `schedule`, a column names the loop carrying each one."""
    items = list(deps)
    counts = {}
    for d in items:
        counts[d.kind] = counts.get(d.kind, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "none"
    headers = ["#", "kind", "source → sink", "array", "distance"]
    if examples:
        headers.append("example pair")
    if schedule is not None:
        headers.append("carried by")
    headers.append("relation (isl)")
    rows = []
    for k, d in enumerate(items):
        row = [str(k), _badge(d.kind, KIND_COLORS.get(d.kind, "#57606a"), f"pc-kind-{d.kind}"),
               f"<b>{esc(d.source)}</b> → <b>{esc(d.sink)}</b>", _code(d.array), _code(distance_text(d))]
        if examples:
            try:
                row.append(esc(_example_text(deps, d)))
            except Exception as e:
                row.append(_error(e))
        if schedule is not None:
            try:
                row.append(_code(_carried_by(schedule, d)))
            except Exception as e:
                row.append(_error(e))
        row.append(_code(d.relation))
        rows.append(row)
    name = getattr(getattr(getattr(deps, "model", None), "program", None), "name", "")
    title = (f'dependences{" of " + _code(name) if name else ""} <span style="font-weight:normal;{_MUTED}">'
             f'({len(items)}: {esc(summary)})</span>')
    note = (f'<div style="{_MUTED};font-size:11px">flow = read after write (value-based); '
            f'anti = write after read; output = write after write. Distance is sink − source.</div>')
    return _box("polyc-dependences", title, (_table(headers, rows, "pc-deps") if rows else "") + note)


# -- schedule -----------------------------------------------------------------------------------
def _outline_html(node: OutlineNode) -> str:
    if node.kind == "statement":
        return (f'<li class="pc-stmt" style="list-style:none"><b>{esc(node.name)}</b>: '
                f'{_code(node.text)}</li>')
    if node.kind == "loop":
        marks = "".join(_badge(mark_label(m, node.unroll), MARK_COLORS.get(m, "#57606a"), f"pc-mark-{m}")
                        for m in node.marks)
        extra = sorted({e for e in node.exprs.values() if e != node.name})
        what = f' <span style="{_MUTED}">= {esc("; ".join(extra))}</span>' if extra else ""
        inner = "".join(_outline_html(c) for c in node.children)
        return (f'<li class="pc-loop" style="list-style:none"><span style="{_CODE}"><b>for</b> '
                f'{esc(node.name)}</span>{what} {marks}'
                f'<ul style="margin:0;padding-left:18px;border-left:1px dotted #d0d7de">{inner}</ul></li>')
    return "".join(_outline_html(c) for c in node.children)


def schedule_html(schedule) -> str:
    """The schedule as a nested outline of loops with marks, plus its steps and isl maps (folded)."""
    try:
        body = (f'<ul class="pc-outline" style="margin:4px 0;padding-left:4px">'
                f'{_outline_html(schedule_outline(schedule))}</ul>')
    except Exception as e:
        body = _error(e)
    steps = ".".join(schedule.history) if schedule.history else "source order"
    packing = getattr(schedule, "packing", ())
    if packing:
        body += f'<div style="{_MUTED}">packed: ' + ", ".join(
            _code(f"{p.statement} (mr={p.mr}, nv={p.nv}, kc={p.kc}, mc={p.mc}, nc={p.nc})") for p in packing) + "</div>"
    maps = "".join(f'<div>{_code(text)}</div>' for text in schedule.map_texts.values())
    body += _details("schedule maps (isl)", maps)
    title = (f'schedule of {_code(schedule.model.program.name)} '
             f'<span style="font-weight:normal;{_MUTED}">{esc(steps)}</span>')
    return _box("polyc-schedule", title, body)


# -- compiled kernel ----------------------------------------------------------------------------
def cache_path(compiled) -> Optional[str]:
    """Where the compiled library of `compiled` lives on disk, when that is known."""
    for attr in ("library_path", "cache_path", "lib_path"):
        value = getattr(compiled, attr, None)
        if value:
            return str(value)
    last = getattr(compiled, "_last", None)
    # The C that went to the compiler: the source itself, or the CPU emulation of CUDA code.
    sources = {getattr(last, "source", None), getattr(last, "emulation_source", None)} - {None}
    if not sources:
        return None
    from ..runtime.compiler import compiled_library
    hits = [str(path) for path in map(compiled_library, sources) if path is not None]
    return hits[-1] if hits else None


def compiled_html(compiled) -> str:
    """A compiled kernel: target, flags, cache path, schedule (folded) and highlighted source."""
    kernel = getattr(compiled, "kernel", None)
    name = getattr(kernel, "name", "kernel")
    target = getattr(compiled, "target", "?")
    parts: List[str] = []
    try:
        source = compiled.source
        src_html = f'<pre class="pc-code" style="{_PRE}">{highlight_c(source)}</pre>'
    except Exception as e:
        source, src_html = None, _error(e)
    flags = getattr(compiled, "compile_flags", None) or getattr(getattr(compiled, "backend", None), "flags", None)
    if flags:
        parts.append(f'<div>flags: {_code(" ".join(map(str, flags)))}</div>')
    generated = getattr(compiled, "_last", None)
    gpu = getattr(generated, "launch", None)
    symbols = [getattr(k, "symbol", "?") for k in getattr(gpu, "kernels", ())]
    if symbols:
        parts.append(f'<div>GPU kernels: {", ".join(_code(s) for s in symbols)}</div>')
    path = cache_path(compiled)
    if path:
        parts.append(f'<div>cache: {_code(path)}</div>')
    schedule = getattr(compiled, "schedule", None)
    if schedule is not None:
        try:
            parts.append(_details("schedule", schedule_html(schedule)))
        except Exception as e:
            parts.append(_details("schedule (failed)", _error(e)))
    lines = source.count("\n") + 1 if source else 0
    parts.append(_details(f"generated source ({lines} lines)", src_html, open_=True))
    emulation = getattr(generated, "emulation_source", None)
    if emulation:
        parts.append(_details("the C that emulates it on the CPU",
                              f'<pre class="pc-code" style="{_PRE}">{highlight_c(emulation)}</pre>'))
    title = f'compiled {_code(name)} <span style="font-weight:normal;{_MUTED}">target {esc(target)}</span>'
    return _box("polyc-compiled", title, "".join(parts))


# -- any stage ----------------------------------------------------------------------------------
class HTMLView:
    """Rendered HTML that Jupyter displays (`_repr_html_`); `str()` gives the plain-text summary."""

    def __init__(self, html_text: str, text: str = ""):
        self.html = html_text
        self.text = text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text or "<polyc view>"


def view(obj, **options: Any) -> HTMLView:
    """The HTML view of any stage: a kernel, its dependences, a schedule or a compiled kernel.

    `options` go to the view function (e.g. `view(deps, schedule=s)` adds the carried-by column).
    """
    from ..api import Kernel
    from ..poly.dependences import Dependences
    from ..schedule.schedule import Schedule
    if isinstance(obj, Kernel):
        return HTMLView(kernel_html(obj, **options), repr(obj))
    if isinstance(obj, Dependences):
        return HTMLView(dependences_html(obj, **options), str(obj))
    if isinstance(obj, Schedule):
        from ..schedule.outline import outline_text
        return HTMLView(schedule_html(obj, **options), outline_text(obj))
    # Asked of the class: evaluating `source` may generate (or fail to generate) code.
    if hasattr(type(obj), "source") and hasattr(obj, "kernel"):
        return HTMLView(compiled_html(obj, **options), repr(obj))
    raise TypeError(f"no polyc view for {type(obj).__name__}")


# The stages' `_repr_html_` find these views here (`polyc.display`), so no stage imports viz.
register_html("kernel", kernel_html)
register_html("dependences", dependences_html)
register_html("schedule", schedule_html)
register_html("compiled", compiled_html)
