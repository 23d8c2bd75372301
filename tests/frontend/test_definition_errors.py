"""Mistakes in a kernel's text are refused where they are written, with what to do instead."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc


def test_a_where_range_bounded_by_its_own_index_is_refused():
    with pytest.raises(pc.ParseError, match="bounded by k itself.*did you mean K") as e:
        pc.kernel("B[i] +=! A[i, k] where k in 0:k")       # was an empty range: all zeros
    assert e.value.location.column == 31


def test_names_are_read_as_python_reads_identifiers():
    """Python turns the keyword `ﬁ=` into `fi` (NFKC): the kernel must know the tensor as `fi`."""
    k = pc.kernel("B[i] = \ufb01[i] + fi[i]")
    assert [t.name for t in k.program.tensors if t.role == "input"] == ["fi"]
    np.testing.assert_array_equal(pc.compile(k)(fi=np.arange(3.0)), [0.0, 2.0, 4.0])


@pytest.mark.parametrize("text", ["B[i] = A[i // 1000000000000000000]", "B[i] = A[999999999999999999 * i]",
                                  "B[i] = A[" + "9" * 30 + " * i]"])
def test_subscripts_beyond_64_bit_arithmetic_are_refused_where_written(text):
    with pytest.raises(pc.ParseError, match="64-bit integers") as e:
        pc.kernel(text)
    assert e.value.location is not None and e.value.location.line == 1


def test_inf_and_nan_are_constants_not_scalar_names():
    with pytest.raises(pc.ParseError, match="constant infinity") as e:
        pc.kernel("B[i] = A[i] * inf", inf=pc.f64)
    assert e.value.location is not None


def test_storing_a_condition_into_an_undeclared_tensor_names_the_statement():
    k = pc.kernel("C[i] = (A[i] > 0.5) + (A[i] > 0.2)")
    with pytest.raises(pc.ParseError, match="stores a condition into C") as e:
        pc.compile(k)(A=np.ones(3))
    assert e.value.location is not None and e.value.location.line == 1


@pytest.mark.parametrize("extent", [-3, 0])
def test_a_constant_extent_below_one_is_refused_at_the_declaration(extent):
    with pytest.raises(pc.ArgumentError, match="must be at least 1"):
        pc.f64[extent]


def test_a_kernel_made_by_a_configured_pc_kernel_points_at_the_users_line():
    with pytest.raises(pc.ParseError) as e:
        pc.kernel(name="bad")("B[i] = A[i] +")
    assert f"{__file__}:" in e.value.location.filename
