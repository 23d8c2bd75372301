"""The space is generated from the primitives' parameter kinds and the Target; candidates are legal."""
from __future__ import annotations

import dataclasses

import numpy as np

import polyc as pc
from polyc.testing.check import check_kernel
from polyc.tune.registry_view import primitives, target_view
from polyc.tune.space import Candidate, Space, build

MM = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_space_mm")
SOFTMAX_LIKE = pc.kernel("s[i] +=! A[i, j]", name="tune_space_rowsum")


def _genes(space):
    return {g.name: g.values for g in space.genes}


def test_genes_come_from_parameter_kinds_and_the_target():
    host = target_view()
    genes = _genes(Space(MM, host, 4))
    assert genes["seed"] == ("auto", "source")
    assert {"tile.i", "tile.j", "tile.k"} <= set(genes)                      # loops auto tiles
    assert {f"pack.S1.{p}" for p in ("mr", "nv", "kc", "mc", "nc")} <= set(genes)  # pack's optional ints
    assert not any(n.startswith("pack.") for n in _genes(Space(SOFTMAX_LIKE, host, 4)))  # no contraction
    # Smaller caches give smaller blocks; one core gives no parallel gene.
    tiny = dataclasses.replace(host, l1=8 * 1024, l2=64 * 1024, l3=256 * 1024, cores=1)
    small = _genes(Space(MM, tiny, 4))
    assert max(v for v in small["pack.S1.kc"] if v) < max(v for v in genes["pack.S1.kc"] if v) or \
        max(v for v in small["pack.S1.mc"] if v) < max(v for v in genes["pack.S1.mc"] if v)
    assert max(v for v in small["tile.i"] if v) <= max(v for v in genes["tile.i"] if v)
    assert "parallel_level" not in small
    assert "pack" in primitives() and any(p.kind == "loop_sizes" for p in primitives()["tile"].params)


def test_seeds_are_auto_and_source_order():
    space = Space(MM, target_view(), 8)
    cand, sched = space.realize(space.default())
    assert cand == Candidate("auto") and sched.maps == space.auto.maps
    cand, _ = space.realize(space.source())
    assert cand.seed == "source"


def test_realised_candidates_are_legal_and_correct():
    space = Space(MM, target_view(), 8)
    rng = np.random.default_rng(5)
    for _ in range(2):
        cand, sched = space.realize(space.random(rng))
        assert build(MM, cand, space.target).maps == sched.maps      # the recipe rebuilds it
        check_kernel(MM, sched, sizes={"I": 19, "J": 23, "K": 21})


def test_refused_steps_are_counted_not_kept():
    space = Space(SOFTMAX_LIKE, target_view(), 8)
    rng = np.random.default_rng(0)
    cands = [space.realize(space.random(rng))[0] for _ in range(8)]
    assert space.refused > 0              # some unroll / unroll-and-jam / parallel steps were refused
    for cand in cands:                    # and none of them is in a candidate: each rebuilds cleanly
        build(SOFTMAX_LIKE, cand, space.target)


def test_mutation_and_crossover_stay_in_the_space():
    space = Space(MM, target_view(), 4)
    rng = np.random.default_rng(0)
    a, b = space.random(rng), space.random(rng)
    values = _genes(space)
    for g in (space.mutate(a, rng), space.crossover(a, b, rng)):
        assert set(g) == set(values) and all(g[n] in values[n] for n in g)
    child = space.crossover(a, b, rng)
    packs = [n for n in values if n.startswith("pack.")]
    assert all(child[n] == a[n] for n in packs) or all(child[n] == b[n] for n in packs)  # groups stay whole


def test_the_product_the_other_way_round_is_a_gene_and_builds():
    """`pack`'s tensor parameter `lanes` gives a gene per contraction: the product as recognised
    or turned round (a convolution's weight gradient runs its output channels as lanes)."""
    wgrad = pc.kernel("K_grad[f, c, kh, kw] +=! Y_grad[n, f, h, w] * X[n, c, h + kh, w + kw]", name="tune_wgrad",
                      X=pc.f64["N", "C", "HO + KH - 1", "WO + KW - 1"], Y_grad=pc.f64["N", "F", "HO", "WO"],
                      K_grad=pc.f64["F", "C", "KH", "KW"])
    space = Space(wgrad, target_view(), 8)
    assert _genes(space)["pack.S1.lanes"][1:] == ("Y_grad",)
    assert "pack.S1.lanes" not in _genes(Space(MM, target_view(), 8))     # a plain product keeps its way
    genome = dict(space.default(), **{"pack.S1.lanes": "Y_grad"})
    cand, sched = space.realize(genome)
    assert sched.packing[-1].contraction.n == ("f",)
    assert build(wgrad, cand, space.target).maps == sched.maps
    check_kernel(wgrad, sched, sizes={"N": 2, "C": 3, "F": 5, "KH": 2, "KW": 3, "HO": 6, "WO": 7})
