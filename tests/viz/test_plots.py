"""matplotlib pictures: the points, arrows and colours drawn are checked against what they mean."""
import itertools

import matplotlib
import pytest

import polyc as pc
from polyc.viz.plots import plot_dependence_graph, plot_domain, plot_schedule

from ._kernels import jacobi_1d, matmul, scale, skewed_wave, tiled, wave

matplotlib.use("Agg")  # harmless: the plots never need a backend; this only guards pyplot users


def _scatter(fig, label):
    hits = [c for c in fig.axes[0].collections if c.get_label() == label and not hasattr(c, "U")]
    assert len(hits) == 1, [c.get_label() for c in fig.axes[0].collections]
    return [tuple(p) for p in hits[0].get_offsets()]


def _arrows(fig, kind):
    hits = [c for c in fig.axes[0].collections if c.get_label() == f"{kind} dependences"]
    return sum(len(c.U) for c in hits)


def _jacobi_flow_pairs(N, T):
    """Flow pairs of jacobi-1d by hand: S0[t, i] -> S1[t, i'] and S1[t, i] -> S0[t+1, i'], |i - i'| <= 1."""
    inner = range(1, N - 1)
    near = [(i, j) for i in inner for j in inner if abs(i - j) <= 1]
    return len(near) * T + len(near) * (T - 1)


def test_domain_of_a_2d_stencil_has_every_point_and_every_flow_arrow():
    fig = plot_domain(jacobi_1d, sizes={"N": 8, "T": 4})
    s0 = _scatter(fig, "S0")
    assert sorted((int(x), int(y)) for x, y in s0) == [(t, i) for t in range(4) for i in range(1, 7)]
    s1 = _scatter(fig, "S1")
    assert len(s1) == 24 and all(x % 1 == 0.5 for x, _ in s1)   # S1 drawn half a step later
    assert _arrows(fig, "flow") == _jacobi_flow_pairs(8, 4) == 112
    assert fig.polyc["arrows"] == {"flow": 112}
    assert fig.axes[0].get_xlabel() == "t" and fig.axes[0].get_ylabel() == "i"
    png = fig._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_domain_slice_of_a_3d_domain_fixes_the_other_iterator():
    mm = matmul()
    fig = plot_domain(mm, statement="S1", sizes={"I": 4, "J": 5, "K": 3}, dims=("i", "k"), fix={"j": 2},
                      dependences="all")
    pts = sorted((int(x), int(y)) for x, y in _scatter(fig, "S1"))
    assert pts == list(itertools.product(range(4), range(3)))
    assert fig.polyc["slice"].fixed == (("j", 2),)
    # Along k: flow k -> k+1 (2 per i); anti and output k -> k' > k (3 per i).
    assert _arrows(fig, "flow") == 4 * 2
    assert _arrows(fig, "anti") == 4 * 3 and _arrows(fig, "output") == 4 * 3
    assert "slice j=2" in fig.axes[0].get_title()


def test_domain_unnamed_iterators_default_to_their_smallest_value_and_arrows_can_be_off():
    fig = plot_domain(matmul(), statement="S1", sizes={"I": 3, "J": 3, "K": 3}, dependences=False)
    assert fig.polyc["slice"].dims == ("i", "j") and fig.polyc["slice"].fixed == (("k", 0),)
    assert len(_scatter(fig, "S1")) == 9
    assert not [c for c in fig.axes[0].collections if hasattr(c, "U")]


def test_domain_of_a_1d_kernel_and_a_triangular_one():
    k = pc.kernel("B[i] = A[i] * 2.0", A=pc.f64["N"], B=pc.f64["N"])
    fig = plot_domain(k, sizes={"N": 6})
    assert [int(x) for x, _ in _scatter(fig, "S0")] == list(range(6))
    tri = pc.kernel("L[i, k] = A[i, k] where k in 0:i+1", A=pc.f64["N", "N"], L=pc.f64["N", "N"])
    fig = plot_domain(tri, sizes={"N": 5}, dims=("i", "k"))
    assert len(_scatter(fig, "S0")) == 5 * 6 // 2


def test_domain_errors_name_what_is_missing():
    with pytest.raises(pc.PolycError, match="missing T"):
        plot_domain(jacobi_1d, sizes={"N": 8})
    with pytest.raises(pc.PolycError, match="no statement named 'S9'"):
        plot_domain(jacobi_1d, statement="S9", sizes={"N": 8, "T": 2})
    with pytest.raises(pc.PolycError, match="points"):
        plot_domain(jacobi_1d, sizes={"N": 10**6, "T": 10**3})


def test_schedule_coloured_by_tile_groups_points_by_outer_tile_dims():
    fig = plot_schedule(tiled(scale(), 4), sizes={"N": 8, "M": 12})
    data = fig.polyc
    assert data["color_by"] == "tile" and data["tile_dims"] == ("i_o", "j_o")
    groups = {}
    for (name, (i, j)), key in data["groups"].items():
        groups.setdefault(key, []).append((i, j))
    assert len(groups) == 2 * 3 and all(len(v) == 16 for v in groups.values())
    assert all(len({(i // 4, j // 4) for i, j in v}) == 1 for v in groups.values())
    # Execution order: tile by tile, row-major inside a tile.
    assert [p for _, p in data["order"][:5]] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert len(_scatter(fig, "S0")) == 96
    assert "6 tiles" in fig.axes[0].get_title()


def test_schedule_untiled_is_coloured_by_execution_order_and_numbered():
    fig = plot_schedule(jacobi_1d.schedule(), sizes={"N": 6, "T": 2})
    data = fig.polyc
    assert data["color_by"] == "time" and data["tile_dims"] == ()
    # Source order: for t: S0 over i, then S1 over i.
    expected = [(s, (t, i)) for t in range(2) for s in ("S0", "S1") for i in range(1, 5)]
    assert data["order"] == expected
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(map(int, labels)) == list(range(16))


def test_schedule_wavefronts_after_skewing():
    N = 6
    fig = plot_schedule(skewed_wave(), sizes={"N": N}, color_by="wavefront", dependences=True)
    data = fig.polyc
    fronts = {}
    for (_, (i, j)), key in data["groups"].items():
        fronts.setdefault(key, set()).add(i + j)
    assert len(fronts) == 2 * N - 3 and all(len(v) == 1 for v in fronts.values())
    assert "9 wavefronts" in fig.axes[0].get_title()
    # Every flow arrow goes from one wavefront to the next.
    assert data["arrows"] == {"flow": 2 * (N - 1) * (N - 2)}


def test_schedule_rejects_an_unknown_colouring():
    with pytest.raises(pc.PolycError, match="color_by"):
        plot_schedule(wave.schedule(), sizes={"N": 4}, color_by="rainbow")


def test_dependence_graph_has_a_node_per_statement_and_labelled_edges():
    fig = plot_dependence_graph(jacobi_1d)
    edges = fig.polyc["edges"]
    assert fig.polyc["nodes"] == ["S0", "S1"]
    assert set(edges) == {("S0", "S1"), ("S1", "S0"), ("S0", "S0"), ("S1", "S1")}
    assert "flow B" in edges[("S0", "S1")] and "flow A" in edges[("S1", "S0")]
    assert len(fig.axes[0].patches) == len(edges)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "anti A, flow B" in texts and "S0" in texts and "S1" in texts
    fig = plot_dependence_graph(matmul(), kinds=("flow",))
    assert fig.polyc["edges"] == {("S1", "S1"): ["flow C"], ("S0", "S1"): ["flow C"]}


def test_draws_into_a_given_axes():
    from matplotlib.figure import Figure
    fig = Figure()
    ax1, ax2 = fig.subplots(1, 2)
    out = plot_domain(wave, sizes={"N": 4}, ax=ax1)
    plot_schedule(wave.schedule(), sizes={"N": 4}, ax=ax2)
    assert out is fig and len(ax1.collections) >= 1 and len(ax2.collections) >= 1


def test_names_with_dollar_signs_are_drawn_as_text_not_typeset():
    k = pc.kernel("B[i] = A[i] * 2.0\nC[i] = B[i] + B[i + 1]", name="cost $\\foo{$")
    fig = plot_dependence_graph(k)
    fig = getattr(fig, "figure", fig)
    assert fig._repr_png_().startswith(b"\x89PNG")          # matplotlib's mathtext raised here
    texts = [t for ax in fig.axes for t in ax.texts] + [ax.title for ax in fig.axes]
    assert texts and not any(t.get_parse_math() for t in texts)
