"""The generated loops are read back into isl and proven to run every instance exactly once.

isl 0.28's AST generator drops a loop of some strided, tiled and skewed schedules (found by the
kernel fuzzer); polyc detects that, regenerates the loops another way, and compiles only loops
that pass the check.
"""
from __future__ import annotations

import importlib
import textwrap

import islpy as isl
import numpy as np
import pytest

import polyc as pc

ast_check = importlib.import_module("polyc.codegen.ast_check")
loop_ast = importlib.import_module("polyc.codegen.loop_ast")


def _loop_kernel(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text("import polyc as pc\n\n" + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return pc.kernel(getattr(module, name))


def _strided(tmp_path):
    return _loop_kernel(tmp_path, "stride_skew", """
        def stride_skew(A: pc.i64['N', 'M']):
            for i in range(0, N, 2):
                for j in range(M):
                    A[i, j] += 1
        """)


def _skewed_schedule(k):
    return (k.schedule().tile(j=8, i=4).skew("i_inner", "j_outer", 1).split("i_inner", 4)
            .skew("j_outer", "j_inner", 1))


def test_isl_drops_a_loop_of_this_schedule(tmp_path):
    """The defect itself: isl's own loops for the schedule miss row i = 2 (N = 3, M = 7)."""
    k = _strided(tmp_path)
    s = _skewed_schedule(k)
    root = isl.AstBuild.from_context(k.model.codegen_context).node_from_schedule_map(s.schedule_map)
    loops = loop_ast._convert(root, {})
    problem = ast_check.loops_run_domain_once(loops, k.model.pstr, s.schedule_map.domain(),
                                              k.model.codegen_context)
    assert problem is not None and "never run" in problem


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_strided_skewed_schedule_runs_every_iteration(tmp_path, target):
    """Right answer, or (where the regenerated loops are wrong too: the GPU mapping of this schedule)
    a typed refusal naming isl's defect; never a silently wrong result."""
    k = _strided(tmp_path)
    got, want = np.zeros((3, 7), dtype=np.int64), np.zeros((3, 7), dtype=np.int64)
    try:
        pc.compile(k, _skewed_schedule(k), target=target)(A=got)
    except pc.errors.LoopGenerationError as e:
        assert target == "cuda-emu" and "defect of isl" in str(e) and "never run" in str(e)
        return
    k.reference(A=want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[::2], 1)


def test_correct_loops_pass_and_missing_or_repeated_instances_are_found():
    k = pc.kernel("B[i] = A[i] * 2.0")
    s = k.schedule()
    loops = loop_ast.build_loop_ast(s)
    domain, ctx = s.schedule_map.domain(), k.model.codegen_context
    assert ast_check.loops_run_domain_once(loops, k.model.pstr, domain, ctx) is None
    loop = loops if isinstance(loops, loop_ast.Loop) else next(n for n in loop_ast.walk(loops)
                                                                  if isinstance(n, loop_ast.Loop))
    one = loop_ast.LExpr("int", value=1)
    skipping = loop_ast.Loop(loop.iterator, one, loop.cond, 1, loop.body, loop.dim)        # starts at 1
    assert "never run" in ast_check.loops_run_domain_once(skipping, k.model.pstr, domain, ctx)
    twice = loop_ast.Block((loop, loop))
    assert "more than once" in ast_check.loops_run_domain_once(twice, k.model.pstr, domain, ctx)
    beyond = loop_ast.Loop(loop.iterator, loop.init, loop_ast.LExpr(
        "<=", (loop.cond.args[0], loop.cond.args[1])), 1, loop.body, loop.dim)             # one too far
    assert "outside" in ast_check.loops_run_domain_once(beyond, k.model.pstr, domain, ctx)


def test_the_check_runs_for_strided_domains_not_for_pieces_of_a_jammed_schedule(tmp_path, monkeypatch):
    """`unroll_and_jam(separate=True)` cuts a domain at multiples of its factor: divisions in the
    schedule's pieces, not strides of the iteration domain, which isl's defects need.  Checking them
    cost covariance 12 s of isl before its budget gave up; they are not checked.  A user's
    `range(0, N, 2)` still is."""
    calls = []
    real = ast_check.loops_run_domain_once

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(ast_check, "loops_run_domain_once", counting)
    mv = pc.kernel("y[i] += A[i, j] * x[j]", name="mv_jammed")
    pc.codegen(mv, mv.schedule().unroll_and_jam("i", 8, separate=True))
    assert calls == []
    k = _strided(tmp_path)
    pc.codegen(k, _skewed_schedule(k))
    assert calls  # (twice: this schedule is one isl gets wrong, and the loops made again are checked)
