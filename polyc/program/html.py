"""Jupyter view of a program: the operator graph drawn as an SVG with fused groups boxed, the
decisions, the memory plan and each group's loop outline."""
from __future__ import annotations

import html
from typing import Dict, List, Tuple

_COLOURS = ("#e8f0fe", "#fce8e6", "#e6f4ea", "#fef7e0", "#f3e8fd", "#e0f7fa")


def _graph_svg(prog, units) -> str:
    """Operators left to right in call order; a coloured box per unit; arrows for tensors."""
    w, h, gap = 150, 34, 30
    xs: Dict[str, Tuple[int, int]] = {}
    parts: List[str] = []
    x = 10
    for k, u in enumerate(units):
        nodes = u.nodes if hasattr(u, "nodes") else (u.node,)
        width = len(nodes) * (w + gap) - gap + 16
        vendor = not hasattr(u, "nodes")
        colour = "#eeeeee" if vendor else _COLOURS[k % len(_COLOURS)]
        parts.append(f'<rect x="{x}" y="20" width="{width}" height="{h + 36}" rx="8" fill="{colour}" '
                     f'stroke="#888" stroke-dasharray="{"4 3" if vendor else "none"}"/>')
        label = f"{u.name} (BLAS)" if vendor else f"{u.name}"
        parts.append(f'<text x="{x + 8}" y="34" font-size="11" fill="#555">{html.escape(label)}</text>')
        nx = x + 8
        for n in nodes:
            parts.append(f'<rect x="{nx}" y="42" width="{w}" height="{h}" rx="4" fill="white" stroke="#333"/>')
            parts.append(f'<text x="{nx + w / 2}" y="{42 + h / 2 + 4}" font-size="12" text-anchor="middle">'
                         f'{html.escape(n.name)}</text>')
            for p in n.outputs:
                xs[p] = (nx + w, 42 + h // 2)
            for p in n.inputs:
                if p in xs:
                    sx, sy = xs[p]
                    parts.append(f'<path d="M{sx},{sy} C{sx + 20},{sy + 40} {nx - 20},{sy + 40} {nx},{sy}" '
                                 f'fill="none" stroke="#1a73e8" marker-end="url(#arr)"/>')
            nx += w + gap
        x += width + gap
    defs = ('<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
            '<path d="M0,0 L8,4 L0,8 z" fill="#1a73e8"/></marker></defs>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{x}" height="{h + 80}">{defs}'
            + "".join(parts) + "</svg>")


def program_html(prog) -> str:
    """The program's picture: its graph with fused groups (once planned), notes, memory, outlines."""
    out = [f"<div><b>polyc program {html.escape(prog.name)}</b>({html.escape(', '.join(prog.inputs))})"]
    plan = prog._last
    if plan is None:
        out.append("<p>operators: " + html.escape(", ".join(n.name for n in prog.nodes)) +
                   " (call the program or use <code>.plan(**arrays)</code> to see its groups)</p>")
    else:
        out.append(_graph_svg(prog, plan.units))
        out.append("<pre>" + html.escape(prog.explain()) + "</pre>")
        for u in plan.units:
            if hasattr(u, "kernel"):
                out.append(f"<details><summary>{html.escape(u.name)}: loop outline</summary><pre>"
                           + html.escape(str(u.kernel.schedule())) + "</pre></details>")
    out.append("</div>")
    return "".join(out)
