"""Arrays from other libraries through DLPack (`__dlpack__`), bound without copies.

No third-party array library is needed: numpy arrays export DLPack themselves, and `Exported`
below is an object that offers nothing but `__dlpack__`/`__dlpack_device__` (as a PyTorch CPU
tensor or a JAX CPU array does), so polyc can only reach its memory through DLPack."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.runtime.dlpack import host_view


class Exported:
    """Only the DLPack protocol, over a numpy array's memory (optionally claiming another device)."""

    def __init__(self, array: np.ndarray, device: tuple = None, refuse: bool = False, negated: bool = False):
        self._array, self._device, self._refuse, self._negated = array, device, refuse, negated

    def is_neg(self):          # PyTorch's lazy negation bit, which DLPack does not carry
        return self._negated

    def __dlpack__(self, **kwargs):
        if self._refuse:
            raise BufferError("cannot export a tensor that requires grad")
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device or self._array.__dlpack_device__()


SCALE = pc.kernel("y[i] = x[i] * 2", name="dl_scale")
MATMUL = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="dl_matmul")


def test_a_dlpack_only_object_is_viewed_not_copied():
    x = np.arange(6.0)
    view = host_view("x", Exported(x))
    assert isinstance(view, np.ndarray) and np.shares_memory(view, x)
    assert host_view("x", x) is x                     # numpy arrays pass through untouched
    assert host_view("n", 3) == 3


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_inputs_and_outputs_through_dlpack(target):
    rng = np.random.default_rng(0)
    a, b = rng.random((5, 7)), rng.random((7, 4))
    c = np.full((5, 4), np.nan)
    f = pc.compile(MATMUL, target=target)
    result = f(A=Exported(a), B=Exported(b), C=Exported(c))
    np.testing.assert_allclose(c, a @ b)              # written in place: the caller's memory
    assert np.shares_memory(result, c)
    allocated = f(A=Exported(a), B=Exported(b))       # an output polyc allocates is a numpy array
    assert isinstance(allocated, np.ndarray)
    np.testing.assert_allclose(allocated, a @ b)


def test_an_inout_array_through_dlpack_is_updated_in_place():
    @pc.kernel
    def dl_prefix(A: pc.f64["N"]):
        for i in range(1, N):
            A[i] = A[i] + A[i - 1]

    a = np.arange(1.0, 6.0)
    pc.compile(dl_prefix)(A=Exported(a))
    np.testing.assert_array_equal(a, [1, 3, 6, 10, 15])


def test_dlpack_arrays_get_the_usual_checks():
    x = np.arange(4.0)
    with pytest.raises(pc.ArgumentError, match="y and x alias"):
        pc.compile(SCALE)(x=Exported(x), y=Exported(x))
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with pytest.raises(pc.ArgumentError, match="y is read-only"):
        pc.compile(SCALE)(x=Exported(x), y=Exported(frozen))
    with pytest.raises(pc.ArgumentError, match="dtype"):
        pc.compile(SCALE)(x=Exported(np.arange(4, dtype=np.int8)))


def test_device_memory_and_refused_exports_are_argument_errors():
    x = np.arange(4.0)
    with pytest.raises(pc.ArgumentError, match=r"x is a Exported on DLPack device type 2, not in host memory"):
        pc.compile(SCALE)(x=Exported(x, device=(2, 0)))
    with pytest.raises(pc.ArgumentError, match="cannot view the Exported through DLPack without a copy.*requires grad"):
        pc.compile(SCALE)(x=Exported(x, refuse=True))


def test_a_tensor_with_a_lazy_negation_bit_is_refused():
    """numpy's from_dlpack reads the memory without the sign (`z.conj().imag` in PyTorch)."""
    with pytest.raises(pc.ArgumentError, match=r"lazy negation bit .* x.resolve_neg\(\)"):
        pc.compile(SCALE)(x=Exported(np.ones(3), negated=True))


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_written_torch_tensor_bumps_its_version_for_autograd(target):
    torch = pytest.importorskip("torch")
    a = torch.rand(3, dtype=torch.float64, requires_grad=True)
    b = a.exp()                       # autograd saves b for the backward
    before = b._version
    pc.compile(SCALE, target=target)(x=np.ones(3), y=b.detach())
    assert b._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_program_takes_dlpack_inputs_as_its_kernels_do(target):
    @pc.program(target=target)
    def product(A: pc.f64["M", "K"], B: pc.f64["K", "N"]):
        return MATMUL(A=A, B=B)

    rng = np.random.default_rng(1)
    a, b = rng.random((3, 4)), rng.random((4, 2))
    np.testing.assert_allclose(product(A=Exported(a), B=Exported(b)), a @ b)
    with pytest.raises(pc.ArgumentError, match="lazy negation"):
        product(A=Exported(a, negated=True), B=b)


def test_a_non_contiguous_tensor_is_told_how_to_fix_it_in_its_own_library():
    class Tensor(Exported):      # what PyTorch offers: .contiguous()
        def contiguous(self):
            return self

    a = np.ones((4, 3)).T
    with pytest.raises(pc.ArgumentError, match=r"use A\.contiguous\(\)"):
        pc.compile(MATMUL)(A=Tensor(a), B=np.ones((4, 2)))
    with pytest.raises(pc.ArgumentError, match=r"use np\.ascontiguousarray\(A\)"):
        pc.compile(MATMUL)(A=a, B=np.ones((4, 2)))
