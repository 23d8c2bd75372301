"""The CUDA runtime without a GPU: target availability, device-array checks, the host driver."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.codegen.cuda_ir import GPUKernel, eval_lexpr, launch_dims
from polyc.codegen.loop_ast import LExpr
from polyc.errors import ArgumentError, IllegalScheduleError, TargetUnavailableError
from polyc.runtime.cuda import cuda_compiled_kernel
from polyc.runtime.cuda_arrays import device_array, is_device_array
from polyc.schedule.auto_gpu import auto_gpu_schedule
from polyc.schedule.gpu import map_to_blocks, map_to_threads

from .conftest import driver_available


class FakeDeviceArray:
    """Exposes `__cuda_array_interface__` like CuPy/PyTorch do, without any GPU memory."""

    def __init__(self, shape, dtype="<f4", strides=None, pointer=0x10000, readonly=False, device=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": dtype, "strides": strides,
                                         "data": (pointer, readonly), "version": 3}
        if device is not None:
            self.device = device


class FakeDevice:
    def __init__(self, type_, index=0):
        self.type = type_
        self.index = index


class RecordingBackend:
    """A backend that records launches instead of running them (exercises the host side)."""

    name = "fake"
    device_ordinal = 0

    def __init__(self):
        self.launches = []
        self.pointers = None

    def check_device_arrays(self, device):
        self.device = device

    def load(self, gen):
        return None

    def prepare(self, gen, handle, bound, device, passed=frozenset()):
        from polyc.runtime.cuda import walk_host
        self.pointers = {n: d.pointer for n, d in device.items()}
        walk_host(gen.launch, bound.sizes, lambda k, g, b, h: self.launches.append((k.symbol, g, b, h)))
        return lambda: None


def matmul():
    return pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_rt")


@pytest.mark.skipif(driver_available(), reason="a CUDA driver and GPU are present here")
def test_cuda_target_without_gpu_is_unavailable():
    with pytest.raises(TargetUnavailableError) as info:
        pc.compile(matmul(), target="cuda")
    assert "cuda-emu" in str(info.value)


def test_codegen_still_works_without_gpu():
    from polyc.api import codegen
    assert "__global__" in codegen(matmul(), target="cuda", dtypes={"A": pc.f32, "B": pc.f32})


def test_device_array_checks():
    ok = device_array("A", FakeDeviceArray((4, 5)))
    assert ok.shape == (4, 5) and ok.dtype == pc.f32 and ok.pointer == 0x10000
    with pytest.raises(ArgumentError, match="not C-contiguous"):
        device_array("A", FakeDeviceArray((4, 5), strides=(4, 16)))       # a transposed view
    device_array("A", FakeDeviceArray((4, 5), strides=(20, 4)))            # explicit C strides are fine
    with pytest.raises(ArgumentError, match="device 'cpu'"):
        device_array("A", FakeDeviceArray((4, 5), device=FakeDevice("cpu")))
    with pytest.raises(ArgumentError, match="GPU 1"):
        device_array("A", FakeDeviceArray((4, 5), device=FakeDevice("cuda", 1)), device_ordinal=0)
    with pytest.raises(ArgumentError, match="float16"):
        device_array("A", FakeDeviceArray((4, 5), dtype="<f2"))
    with pytest.raises(ArgumentError, match="null"):
        device_array("A", FakeDeviceArray((4, 5), pointer=0))
    assert is_device_array(FakeDeviceArray((1,))) and not is_device_array(np.zeros(1))


def test_emulator_refuses_device_arrays():
    f = pc.compile(matmul(), target="cuda-emu")
    with pytest.raises(ArgumentError, match="emulator"):
        f(A=FakeDeviceArray((3, 4)), B=np.ones((4, 2), np.float32))


def test_wrong_layout_device_array_refused_by_cuda_call():
    f = cuda_compiled_kernel(matmul(), auto_gpu_schedule(matmul().schedule()), target="cuda", backend=RecordingBackend())
    with pytest.raises(ArgumentError, match="C-contiguous"):
        f(A=FakeDeviceArray((3, 4), strides=(4, 12)), B=FakeDeviceArray((4, 2), pointer=0x20000))


def test_read_only_and_overlapping_device_outputs_refused():
    k = matmul()
    f = cuda_compiled_kernel(k, auto_gpu_schedule(k.schedule()), target="cuda", backend=RecordingBackend())
    a, b = FakeDeviceArray((3, 4)), FakeDeviceArray((4, 2), pointer=0x20000)
    with pytest.raises(ArgumentError, match="read-only"):
        f(A=a, B=b, C=FakeDeviceArray((3, 2), pointer=0x30000, readonly=True))
    with pytest.raises(ArgumentError, match="overlap"):
        f(A=a, B=b, C=FakeDeviceArray((3, 2), pointer=0x10010))


def test_host_driver_binds_device_arrays_and_launch_sizes():
    k = matmul()
    backend = RecordingBackend()
    f = cuda_compiled_kernel(k, auto_gpu_schedule(k.schedule()), target="cuda", backend=backend)
    f(A=FakeDeviceArray((100, 7)), B=FakeDeviceArray((7, 70), pointer=0x90000),
      C=FakeDeviceArray((100, 70), pointer=0xF0000))
    assert backend.pointers == {"A": 0x10000, "B": 0x90000, "C": 0xF0000}
    assert backend.launches, "no kernel launched"
    for symbol, grid, block, host in backend.launches:
        assert all(g >= 1 for g in grid) and 1 <= block[0] * block[1] * block[2] <= 1024
        # every (i, j) must be covered: grid * block >= extents along each mapped axis
    threads = [g[0] * b[0] for _, g, b, _ in backend.launches]
    assert max(threads) >= 70


def test_launch_dims_clamp_to_cuda_limits():
    big = LExpr("int", value=10 ** 6)
    k = GPUKernel("k", None, (), (big, big, None), (big, LExpr("int", value=0), None))
    grid, block = launch_dims(k, {})
    assert grid == (10 ** 6, 65535, 1)
    assert block[0] <= 1024 and block[1] == 1


def test_eval_lexpr_follows_isl_semantics():
    e = LExpr("floord", (LExpr("int", value=-7), LExpr("int", value=2)))
    assert eval_lexpr(e, {}) == -4
    e = LExpr("min", (LExpr("id", value="N"), LExpr("int", value=3)))
    assert eval_lexpr(e, {"N": 10}) == 3


def test_explicit_mapping_runs_on_emulator():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_explicit")
    s = map_to_threads(map_to_blocks(k.schedule(), "i"), "j")
    f = pc.compile(k, s, target="cuda-emu")
    a = np.random.default_rng(0).random((13, 9), dtype=np.float32)
    b = np.random.default_rng(1).random((9, 11), dtype=np.float32)
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-5)


def test_mapping_a_dependence_carrying_loop_is_refused():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_illegal")
    with pytest.raises(IllegalScheduleError, match="'k'"):
        map_to_threads(k.schedule(), "k")


def test_emulator_catches_a_racy_mapping(monkeypatch):
    """Forcing a thread mark on a loop that carries a dependence gives a wrong answer on the
    emulator (threads run backwards), so mapping bugs cannot hide behind source order.
    `pc.compile` re-proves every mark it is given, so the proof is switched off to see that."""
    @pc.kernel
    def prefix(x: pc.f64["N"]):
        for i in range(1, N):
            x[i] = x[i] + x[i - 1]
    s = prefix.schedule()
    racy = s.with_mark("i", "thread", "forced")     # bypasses the legality check on purpose
    with pytest.raises(pc.IllegalScheduleError, match="loop 'i' carries"):
        pc.compile(prefix, racy, target="cuda-emu")
    import polyc.schedule.rewrite as rewrite
    monkeypatch.setattr(rewrite, "validate", lambda *a, **k: None)
    x = np.arange(1.0, 9.0)
    good = pc.compile(prefix, s, target="cuda-emu")(x=x.copy())
    bad = pc.compile(prefix, racy, target="cuda-emu")(x=x.copy())
    np.testing.assert_allclose(good, np.cumsum(x))
    assert not np.allclose(bad, np.cumsum(x))
