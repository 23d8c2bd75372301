"""Exact dependences: kinds, statements, arrays and distance vectors."""
import polyc as pc


def test_matmul_dependences():
    deps = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]").dependences()
    flow = deps.of_kind("flow")
    assert {(d.source, d.sink, d.array) for d in flow} == {("S0", "S1", "C"), ("S1", "S1", "C")}
    self_flow = next(d for d in flow if d.source == d.sink)
    assert self_flow.distance == (0, 0, 1)
    assert "on C (flow), distance (0, 0, 1)" in str(self_flow)
    assert deps.of_kind("anti") and deps.of_kind("output")


def test_flow_is_value_based():
    # Each B[i] is read from the *last* writer only: S1, not S0.
    k = pc.kernel("B[i] = A[i]\nB[i] = A[i] * 2\nC[i] = B[i]")
    flow = [d for d in k.dependences().of_kind("flow") if d.array == "B"]
    assert [(d.source, d.sink) for d in flow] == [("S1", "S2")]


def test_stencil_distance_vectors():
    def jac(A: pc.f64["N"], T: int):
        for t in range(T):
            for i in range(1, N - 1):  # noqa: F821
                A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
    deps = pc.kernel(jac).dependences()
    distances = {v for d in deps if d.kind == "flow" for v in d.distances}
    assert (0, 1) in distances and (1, -1) in distances and (1, 0) in distances
