"""HTML views: each one rendered, and its content checked (not just that it renders)."""
import re

import numpy as np
import pytest

import polyc as pc
from polyc.viz.highlight import highlight_c
from polyc.viz.html import compiled_html, dependences_html, kernel_html, schedule_html
from polyc.schedule.outline import outline_text

from ._kernels import jacobi_1d, matmul, skewed_wave, tiled, scale


def _rows(html, table_class):
    table = re.search(rf'<table class="{table_class}".*?</table>', html, re.S).group(0)
    return re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)


def _text(fragment):
    return re.sub(r"<[^>]+>", "", fragment)


def test_kernel_view_lists_tensors_statements_and_domains():
    mm = matmul()
    html = kernel_html(mm)
    assert "matmul" in html and "einsum" in html
    tensors = [_text(r) for r in _rows(html, "pc-tensors")]
    assert any(r.startswith("C") and "output" in r for r in tensors)
    assert any(r.startswith("A") and "input" in r for r in tensors)
    statements = [_text(r) for r in _rows(html, "pc-statements")]
    assert len(statements) == 2
    assert statements[0].startswith("S0") and "C[i, j] = 0" in statements[0]
    assert "C[i, j] += A[i, k] * B[k, j]" in statements[1] and "reduction over k" in statements[1]
    # The isl domain, escaped: `0 <= k < K` must appear as text, never as a raw `<`.
    assert "0 &lt;= k &lt; K" in statements[1]
    assert mm._repr_html_() == html


def test_kernel_view_folds_dependences_and_schedule():
    html = kernel_html(matmul())
    assert "dependences (5)" in html
    assert 'class="polyc-view polyc-dependences"' in html
    assert 'class="polyc-view polyc-schedule"' in html


def test_kernel_view_of_a_loop_kernel_shows_its_python_source():
    html = kernel_html(jacobi_1d)
    assert "for t in range(T):" in html
    assert "0.33333 * (A[i - 1] + A[i] + A[i + 1])" in html
    assert "sizes" in html and ">N<" in html


def test_dependence_table_has_one_row_per_dependence_with_kind_statements_array_distance():
    mm = matmul()
    deps = mm.dependences()
    html = dependences_html(deps)
    rows = [_text(r) for r in _rows(html, "pc-deps")]
    assert len(rows) == len(deps) == 5
    flow_s1 = [r for r in rows if "flow" in r and "S1 → S1" in r]
    assert len(flow_s1) == 1
    assert "(0, 0, 1)" in flow_s1[0]                 # the constant distance
    assert "S1[i=0, j=0, k=0] → S1[i=0, j=0, k=1]" in flow_s1[0]   # one concrete pair
    assert any("flow" in r and "S0 → S1" in r for r in rows)
    assert sum("anti" in r for r in rows) == 1 and sum("output" in r for r in rows) == 2
    assert "2 flow, 1 anti, 2 output" in html
    assert "-&gt;" in html and "->" not in _strip_tags_keep_text(html)


def _strip_tags_keep_text(html):
    # Raw text between tags: an unescaped "->" there would mean isl text was not escaped.
    return "".join(re.findall(r">([^<]*)<", html))


def _records(html, table_class):
    """The table as dicts from header to cell text."""
    table = re.search(rf'<table class="{table_class}".*?</table>', html, re.S).group(0)
    headers = [_text(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
    return [dict(zip(headers, (_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S))))
            for row in _rows(html, table_class)]


def test_dependence_table_names_the_carrying_loop_given_a_schedule():
    mm = matmul()
    html = dependences_html(mm.dependences(), schedule=mm.schedule())
    records = _records(html, "pc-deps")
    by = {(r["kind"], r["source → sink"]): r for r in records}
    assert by[("flow", "S1 → S1")]["carried by"] == "k"
    assert by[("flow", "S1 → S1")]["distance"] == "(0, 0, 1)"
    assert by[("flow", "S1 → S1")]["array"] == "C"
    # S0 -> S1 is ordered by statement order (a scalar dimension), not carried by any loop.
    assert by[("flow", "S0 → S1")]["carried by"] == "-"
    assert by[("flow", "S0 → S1")]["distance"] == "-"


def test_schedule_outline_nests_loops_and_statements():
    text = outline_text(matmul().schedule())
    assert text.splitlines() == [
        "for i", "  for j", "    S0: C[i, j] = 0",
        "for i", "  for j", "    for k", "      S1: C[i, j] += A[i, k] * B[k, j]"]
    text = outline_text(jacobi_1d.schedule())
    assert text.splitlines()[:2] == ["for t", "  for i"]
    assert text.count("for i") == 2 and text.count("for t") == 1   # fused in t, two i loops


def test_schedule_view_shows_marks():
    s = matmul().schedule()
    assert "parallel" not in schedule_html(s)
    marked = s.with_mark("i", "parallel", "parallel('i')").with_mark("j", "vector", "vectorize('j')")
    html = schedule_html(marked)
    assert 'class="pc-badge pc-mark-parallel"' in html and ">parallel<" in html
    assert ">vector<" in html
    assert "parallel(&#x27;i&#x27;).vectorize(&#x27;j&#x27;)" in html   # the steps, escaped
    assert outline_text(marked).splitlines()[0] == "for i [parallel]"
    unrolled = s.unroll("k", 4)
    assert "unroll 4" in schedule_html(unrolled)
    gpu = s.with_mark("i", "block", "map_to_blocks('i')").with_mark("j", "thread", "map_to_threads('j')")
    html = schedule_html(gpu)
    assert ">block<" in html and ">thread<" in html


def test_schedule_view_of_a_tiled_and_a_skewed_schedule():
    text = outline_text(tiled(scale(), 4))
    assert text.splitlines()[:4] == ["for i_o  (floor((i)/4))", "  for j_o  (floor((j)/4))", "    for i", "      for j"]
    text = outline_text(skewed_wave())
    assert text.splitlines()[0] == "for w  (i + j)"
    assert "= i + j" in schedule_html(skewed_wave())


def test_compiled_view_highlights_source_and_shows_flags_and_cache_path():
    mm = matmul()
    f = pc.compile(mm, flags=["-O2"])
    a, b = np.ones((3, 4)), np.ones((4, 2))
    np.testing.assert_allclose(f(A=a, B=b), a @ b)
    html = compiled_html(f)
    assert "-O2" in html and "-fPIC" in html
    path = re.search(r"cache: <code[^>]*>([^<]*)</code>", html).group(1)
    assert path.endswith(".so")
    assert '<span class="pc-kw" style="color:#0000c0;font-weight:bold">for</span>' in html
    assert '<span class="pc-type" style="color:#00808a">double</span>' in html
    assert "&lt; n_I" in html          # `i_i < n_I` escaped inside the code
    assert "<math.h>" not in html and "&lt;math.h&gt;" in html
    assert f._repr_html_() == html


def test_highlighter_escapes_and_classifies_tokens():
    src = '#pragma omp parallel for\nfor (int64_t i = 0; i < N; i++) // a < b & c\n  x[i] = 1.5e3f; /* "q" */'
    out = highlight_c(src)
    assert '<span class="pc-pp"' in out and "#pragma omp parallel for</span>" in out
    assert ">int64_t</span>" in out and ">1.5e3f</span>" in out and ">0</span>" in out
    assert "// a &lt; b &amp; c</span>" in out
    assert "/* &quot;q&quot; */</span>" in out
    assert "i &lt; N" in out
    # Nothing lost: removing the markup gives back the source.
    import html as _html
    assert _html.unescape(re.sub(r"<[^>]+>", "", out)) == src


@pytest.mark.parametrize("cls, fn", [("Dependences", "dependences_html"), ("Schedule", "schedule_html")])
def test_repr_html_hooks(cls, fn):
    mm = matmul()
    obj = mm.dependences() if cls == "Dependences" else mm.schedule()
    import polyc.viz.html as views
    assert obj._repr_html_() == getattr(views, fn)(obj)


def test_dependence_table_lists_every_distance_of_a_stencil():
    from ._kernels import seidel_1d
    records = _records(dependences_html(seidel_1d.dependences()), "pc-deps")
    flow = next(r for r in records if r["kind"] == "flow")
    assert flow["distance"] == "(0, 1), (1, -1), (1, 0)"


def test_view_gives_the_html_of_each_stage_and_a_text_summary():
    from polyc.viz import view
    mm = matmul()
    s = mm.schedule()
    assert view(mm).html == kernel_html(mm)
    assert view(mm.dependences()).html == dependences_html(mm.dependences())
    assert "carried by" in view(mm.dependences(), schedule=s)._repr_html_()
    assert view(s).html == schedule_html(s) and repr(view(s)) == outline_text(s)
    f = pc.compile(mm)
    assert view(f).html == compiled_html(f)
    with pytest.raises(TypeError, match="no polyc view for int"):
        view(3)


def test_outline_follows_the_schedule_primitives():
    s = matmul().schedule().tile(i=8, j=8).parallel("i_outer")
    lines = outline_text(s).splitlines()
    assert lines[0] == "for i_outer [parallel]  (floor((i)/8))"
    assert [ln.strip().split()[1] for ln in lines if ln.strip().startswith("for")][:4] == \
        ["i_outer", "j_outer", "i_inner", "j_inner"]
    peeled = matmul().schedule().peel("k", 1)
    text = outline_text(peeled)
    assert "S1 (piece 1/2)" in text and "S1 (piece 2/2)" in text


def test_compiled_view_of_an_emulated_cuda_kernel():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul", A=pc.f32["M", "K"], B=pc.f32["K", "N"])
    s = mm.schedule().tile(i=4, j=4).map_to_blocks("i_outer", "j_outer").map_to_threads("i_inner", "j_inner")
    f = pc.compile(mm, s, target="cuda-emu")
    a, b = np.ones((5, 3), np.float32), np.ones((3, 6), np.float32)
    np.testing.assert_allclose(f(A=a, B=b), a @ b)
    html = compiled_html(f)
    assert f._repr_html_() == html
    assert "target cuda-emu" in html
    assert re.search(r"GPU kernels: <code[^>]*>polyc_matmul_k0</code>", html)
    assert '<span class="pc-kw" style="color:#0000c0;font-weight:bold">__global__</span>' in html
    assert ">threadIdx</span>" in html
    assert "the C that emulates it on the CPU" in html
    outline = re.sub(r"<[^>]+>", "", schedule_html(s))
    assert "block" in outline and "thread" in outline


def test_compiled_view_renders_before_the_first_call():
    # Undeclared dtypes are only known at the first call; the view must render regardless.
    html = compiled_html(pc.compile(matmul()))
    assert "compiled" in html and "matmul" in html and "flags: " in html
