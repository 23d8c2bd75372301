"""matplotlib pictures: iteration domains with dependence arrows, schedules, dependence graphs.

Every function returns the matplotlib `Figure` (draw into `ax` when given).  matplotlib is
imported lazily, and nothing here selects a GUI backend, so the plots work headless (Agg) in
tests and inline in Jupyter.  The points and pairs drawn come from isl (`polyc.viz.points`); the
data of each picture is also left on the figure as `fig.polyc` (a dict) for tests and tooling.

Conventions: the first of `dims` is the horizontal axis, the second the vertical one; when a
picture shows several statements, statement k is shifted by k/n along the horizontal axis so that
instances of different statements at the same iteration stay apart (e.g. the two half steps of
a Jacobi time step).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import PolycError
from .points import (Point, Slice, make_slice, model_of, schedule_times, slice_dependences,
                     slice_points)

KIND_COLORS = {"flow": "#1f6feb", "anti": "#bf8700", "output": "#8250df"}
STATEMENT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: How far (in iterations) arrows stop short of the points they join.
ARROW_GAP = 0.18
#: Above this many points the execution-order numbers are not written on the picture.
MAX_LABELS = 400


_FIGURE_CLASS: Any = None


def figure_class():
    """`PolycFigure`: a matplotlib Figure that Jupyter shows inline by itself (`_repr_png_`).

    The figures are not made through pyplot: they need no backend, leave no global state behind
    (nothing to close) and are not displayed twice by the inline backend when a cell returns them.
    """
    global _FIGURE_CLASS
    if _FIGURE_CLASS is None:
        import io

        from matplotlib.figure import Figure

        class PolycFigure(Figure):
            def _repr_png_(self) -> bytes:
                buf = io.BytesIO()
                self.savefig(buf, format="png", dpi=100)
                return buf.getvalue()

        _FIGURE_CLASS = PolycFigure
    return _FIGURE_CLASS


def _plain_text(plot: Callable) -> Callable:
    """Run `plot` with matplotlib's mathtext off: names and statements are the user's text, and a
    `$` in them (a kernel named `cost $x$`) is not TeX to typeset, or to fail on when drawn."""
    @functools.wraps(plot)
    def plain(*args: Any, **kwargs: Any) -> Any:
        import matplotlib
        with matplotlib.rc_context({"text.parse_math": False}):
            return plot(*args, **kwargs)
    return plain


def _axes(ax, figsize=(5.5, 4.5)):
    if ax is not None:
        return ax.figure, ax
    fig = figure_class()(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _xy(sl: Slice, statement: str, p: Point) -> Tuple[float, float]:
    n = len(sl.statements)
    shift = sl.statements.index(statement) / n if n > 1 else 0.0
    x = p[0] + shift
    y = p[1] if len(p) > 1 else 0.0
    return x, float(y)


def _title(sl: Slice, what: str) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in sl.sizes)
    fixed = ", ".join(f"{k}={v}" for k, v in sl.fixed)
    text = f"{what} ({sizes})"
    if fixed:
        text += f"\nslice {fixed}"
    return text


def _decorate(ax, sl: Slice) -> None:
    from matplotlib.ticker import MaxNLocator
    ax.set_xlabel(sl.dims[0])
    if len(sl.dims) > 1:
        ax.set_ylabel(sl.dims[1])
    else:
        ax.set_yticks([])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, color="#eaeef2", linewidth=0.6)
    ax.set_axisbelow(True)


def _kinds(dependences: Union[bool, str, Sequence[str]]) -> Tuple[str, ...]:
    if dependences is True:
        return ("flow",)
    if not dependences:
        return ()
    if dependences == "all":
        return ("flow", "anti", "output")
    if isinstance(dependences, str):
        return (dependences,)
    return tuple(dependences)


def _draw_arrows(ax, sl: Slice, pairs) -> Dict[str, int]:
    """One quiver per kind, from source point to sink point; returns arrows drawn per kind."""
    drawn: Dict[str, int] = {}
    by_kind: Dict[str, List[Tuple[float, float, float, float]]] = {}
    for kind, src, snk, _array, a, b in pairs:
        (x0, y0), (x1, y1) = _xy(sl, src, a), _xy(sl, snk, b)
        if (x0, y0) == (x1, y1):
            continue
        # Stop short of both points so the markers do not hide the arrow heads.
        dx, dy = x1 - x0, y1 - y0
        length = (dx * dx + dy * dy) ** 0.5
        gap = min(ARROW_GAP, 0.3 * length) / length
        by_kind.setdefault(kind, []).append((x0 + gap * dx, y0 + gap * dy, (1 - 2 * gap) * dx,
                                             (1 - 2 * gap) * dy))
    for kind, rows in by_kind.items():
        xs, ys, us, vs = zip(*rows)
        ax.quiver(xs, ys, us, vs, angles="xy", scale_units="xy", scale=1, width=0.004,
                  headwidth=4, headlength=5, headaxislength=4.5,
                  color=KIND_COLORS.get(kind, "#57606a"), alpha=0.8, label=f"{kind} dependences",
                  zorder=3)
        drawn[kind] = len(rows)
    return drawn


@_plain_text
def plot_domain(kernel_or_model, statement: Optional[str] = None, sizes: Optional[Mapping[str, int]] = None,
                dims: Optional[Sequence[str]] = None, fix: Optional[Mapping[str, int]] = None, ax=None,
                dependences: Union[bool, str, Sequence[str]] = True):
    """Draw an iteration domain as lattice points, with dependence arrows between the points.

    - `statement`: one statement, or None for every statement that has all of `dims`;
    - `sizes`: a value for every size (isl parameter), e.g. `{"N": 8, "T": 4}`;
    - `dims`: the one or two iterators on the axes (default: the first two of the statement);
    - `fix`: values of other iterators (a 2-D slice of an n-D domain); unnamed ones take their
      smallest value;
    - `dependences`: True (flow), False, "all", or a list of kinds; only pairs with both ends in
      the slice are drawn.
    Returns the Figure; `fig.polyc` holds `points` (per statement) and `arrows` (per kind).
    """
    model = model_of(kernel_or_model)
    sl = make_slice(model, statement, dict(sizes or {}), dims, fix)
    points = slice_points(sl)
    fig, ax = _axes(ax)
    for k, (name, pts) in enumerate(points.items()):
        if not pts:
            continue
        xy = [_xy(sl, name, p) for p in pts]
        ax.scatter([x for x, _ in xy], [y for _, y in xy], s=36, marker=STATEMENT_MARKERS[k % len(STATEMENT_MARKERS)],
                   color=f"C{k}", edgecolors="black", linewidths=0.4, label=name, zorder=2)
    kinds = _kinds(dependences)
    arrows: Dict[str, int] = {}
    pairs: list = []
    if kinds:
        deps = model.dependences
        pairs = slice_dependences(sl, deps, kinds)
        arrows = _draw_arrows(ax, sl, pairs)
    _decorate(ax, sl)
    ax.set_title(_title(sl, f"domain of {', '.join(sl.statements)}"), fontsize=10)
    if len(points) > 1 or arrows:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.polyc = {"slice": sl, "points": points, "arrows": arrows, "pairs": pairs}
    return fig


def _tile_dims(schedule, times: Dict[str, Dict[Point, Tuple[int, ...]]], n_axes: int,
               tile_dims: Optional[Sequence[str]]) -> List[int]:
    """Schedule dimensions that identify a tile.

    Given names are used as they are.  Otherwise: the loop dimensions that vary over the picture,
    except the innermost `n_axes` of them (the point loops), e.g. `i_outer, j_outer` of
    `[i_outer, j_outer, i, j]`; none for an untiled schedule.
    """
    if tile_dims is not None:
        return [schedule.dim_index(n) for n in tile_dims]
    varying = []
    for k, dim in enumerate(schedule.dims):
        if dim.name is None:
            continue
        values = {t[k] for per in times.values() for t in per.values()}
        if len(values) > 1:
            varying.append(k)
    return varying[:-n_axes] if len(varying) > n_axes else []


def _tile_color(key: Tuple[int, ...], lows: Sequence[int]) -> int:
    """A tab10 colour index for a tile: neighbours along any tile dimension (and diagonally) differ."""
    weights = (1, 3, 7, 9)
    return sum((v - lo) * weights[d % 4] for d, (v, lo) in enumerate(zip(key, lows))) % 10


def _wavefront_dim(schedule, times) -> Optional[int]:
    """The outermost loop dimension that varies over the picture."""
    for k, dim in enumerate(schedule.dims):
        if dim.name is None:
            continue
        if len({t[k] for per in times.values() for t in per.values()}) > 1:
            return k
    return None


@_plain_text
def plot_schedule(schedule, sizes: Optional[Mapping[str, int]] = None, dims: Optional[Sequence[str]] = None,
                  statement: Optional[str] = None, fix: Optional[Mapping[str, int]] = None,
                  color_by: str = "auto", tile_dims: Optional[Sequence[str]] = None, ax=None,
                  numbers: Optional[bool] = None, dependences: Union[bool, str, Sequence[str]] = False):
    """Draw the iteration points (in original coordinates) as the schedule runs them.

    `color_by`:
    - "tile": one colour per tile (points sharing the values of the outer tile dimensions of the
      schedule; `tile_dims` names them explicitly);
    - "time": colour by execution order (lexicographic order of the time vectors); points are
      numbered 0, 1, ... when there are few;
    - "wavefront": colour by the value of the outermost varying loop (after skewing, the points of
      one wavefront share it and may run in parallel);
    - "auto": "tile" when the schedule is tiled over the picture, else "time".
    Returns the Figure; `fig.polyc` holds `order` (points in execution order), `groups` (colour
    key per point) and `color_by`.
    """
    model = schedule.model
    sl = make_slice(model, statement, dict(sizes or {}), dims, fix)
    times = {name: schedule_times(schedule, sl, name) for name in sl.statements}
    tdims = _tile_dims(schedule, times, len(sl.dims), tile_dims)
    if color_by == "auto":
        color_by = "tile" if tdims else "time"
    if color_by not in ("tile", "time", "wavefront"):
        raise PolycError(f"color_by must be 'auto', 'tile', 'time' or 'wavefront', not {color_by!r}")
    everything = [(t, name, p) for name, per in times.items() for p, t in per.items()]
    everything.sort(key=lambda e: (e[0], sl.statements.index(e[1])))
    order = [(name, p) for _, name, p in everything]
    if color_by == "time":
        keys = {(name, p): (rank,) for rank, (_, name, p) in enumerate(everything)}
    elif color_by == "tile":
        keys = {(name, p): tuple(t[k] for k in tdims) for t, name, p in everything}
    else:
        wd = _wavefront_dim(schedule, times)
        keys = {(name, p): ((t[wd],) if wd is not None else ()) for t, name, p in everything}
    distinct = sorted(set(keys.values()))
    index = {k: n for n, k in enumerate(distinct)}
    fig, ax = _axes(ax)
    import matplotlib
    cmap = matplotlib.colormaps["viridis" if color_by != "tile" else "tab10"]
    lows = [min(k[d] for k in distinct) for d in range(len(distinct[0]))] if distinct and distinct[0] else []
    denominator = max(1, len(distinct) - 1)
    for s_idx, name in enumerate(sl.statements):
        pts = [p for (nm, p) in order if nm == name]
        if not pts:
            continue
        xy = [_xy(sl, name, p) for p in pts]
        if color_by == "tile":
            colors = [cmap(_tile_color(keys[(name, p)], lows)) for p in pts]
        else:
            colors = [cmap(index[keys[(name, p)]] / denominator) for p in pts]
        ax.scatter([x for x, _ in xy], [y for _, y in xy], s=60, c=colors,
                   marker=STATEMENT_MARKERS[s_idx % len(STATEMENT_MARKERS)], edgecolors="black",
                   linewidths=0.4, label=name, zorder=2)
    if numbers is None:
        numbers = color_by == "time" and len(order) <= MAX_LABELS
    if numbers:
        for rank, (name, p) in enumerate(order):
            x, y = _xy(sl, name, p)
            ax.annotate(str(rank), (x, y), xytext=(0, 5), textcoords="offset points", ha="center",
                        fontsize=6, color="#24292f")
    kinds = _kinds(dependences)
    arrows: Dict[str, int] = {}
    if kinds:
        arrows = _draw_arrows(ax, sl, slice_dependences(sl, model.dependences, kinds))
    _decorate(ax, sl)
    steps = ".".join(schedule.history) if schedule.history else "source order"
    what = {"tile": f"{len(distinct)} tiles", "time": "execution order",
            "wavefront": f"{len(distinct)} wavefronts"}[color_by]
    ax.set_title(_title(sl, f"{steps}: {what}"), fontsize=10)
    fig.polyc = {"slice": sl, "order": order, "groups": keys, "color_by": color_by,
                 "tile_dims": tuple(schedule.dims[k].name for k in tdims), "arrows": arrows}
    return fig


@_plain_text
def plot_dependence_graph(kernel, ax=None, kinds: Sequence[str] = ("flow", "anti", "output")):
    """The dependence graph between statements, as an arc diagram.

    Statements are nodes in a column in program order; an edge per (source, sink) pair is
    labelled by its kinds and arrays (`flow A, anti B`); forward edges arc on the right, backward
    ones on the left, and self-dependences are loops left of their node.  Returns the Figure;
    `fig.polyc["edges"]` maps (source, sink) to its labels.
    """
    from matplotlib.patches import FancyArrowPatch
    program = kernel.program
    deps = kernel.dependences()
    names = [s.name for s in program.statements]
    edges: Dict[Tuple[str, str], List[str]] = {}
    for d in deps:
        if d.kind not in kinds:
            continue
        label = f"{d.kind} {d.array}"
        labels = edges.setdefault((d.source, d.sink), [])
        if label not in labels:
            labels.append(label)
    fig, ax = _axes(ax, figsize=(6.5, max(2.5, 1.1 * len(names) + 1)))
    y = {n: -float(k) for k, n in enumerate(names)}
    from ..ir.text import statement_text
    for n in names:
        ax.scatter([0], [y[n]], s=900, color="#ddf4ff", edgecolors="#0969da", zorder=3)
        ax.text(0, y[n], n, ha="center", va="center", fontsize=10, fontweight="bold", zorder=4)
        ax.text(0.9, y[n], statement_text(program.statement(n)), ha="left", va="center", fontsize=8,
                color="#57606a", family="monospace")
    for (src, snk), labels in edges.items():
        text = ", ".join(labels)
        kinds_here = [label.split()[0] for label in labels]
        color = KIND_COLORS.get("flow" if "flow" in kinds_here else kinds_here[0], "#57606a")
        if src == snk:
            patch = FancyArrowPatch((-0.12, y[src] + 0.12), (-0.12, y[src] - 0.12),
                                    connectionstyle="arc3,rad=1.8", arrowstyle="-|>", mutation_scale=12,
                                    color=color, lw=1.2)
            ax.add_patch(patch)
            ax.text(-0.55, y[src], text, ha="right", va="center", fontsize=8, color=color)
            continue
        forward = y[snk] < y[src]
        x0 = 0.15 if forward else -0.15
        rad = -0.6
        patch = FancyArrowPatch((x0, y[src]), (x0, y[snk]), connectionstyle=f"arc3,rad={rad}",
                                arrowstyle="-|>", mutation_scale=12, color=color, lw=1.2,
                                shrinkA=14, shrinkB=14)
        ax.add_patch(patch)
        span = abs(y[snk] - y[src])
        xm = x0 + (0.35 * span + 0.08 if forward else -0.35 * span - 0.08)
        ax.text(xm, (y[src] + y[snk]) / 2, text, ha="left" if forward else "right", va="center",
                fontsize=8, color=color)
    ax.set_xlim(-2.5, 4.0)
    ax.set_ylim(-len(names) + 0.4, 0.6)
    ax.set_axis_off()
    ax.set_title(f"dependence graph of {kernel.name}", fontsize=10)
    fig.polyc = {"edges": edges, "nodes": names}
    return fig
