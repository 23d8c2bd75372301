"""Element types are named one way everywhere: a pc.DType, its polyc name or a numpy dtype.

Unknown names get a typed error listing the accepted ones, never an AttributeError or a lookup of
whatever attribute of polyc's modules the name happens to match."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError
from polyc.ir.types import as_dtype
from polyc.testing.check import random_inputs

MATMUL = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm")


@pytest.mark.parametrize("spelling", [pc.f64, "f64", "float64", np.float64, np.dtype("float64")])
def test_every_spelling_of_a_type_names_it(spelling):
    assert as_dtype(spelling) is pc.f64
    src = pc.codegen(MATMUL, dtypes={"A": spelling, "B": spelling, "C": spelling})
    assert "double *restrict d_A" in src and "double *restrict d_C" in src


@pytest.mark.parametrize("bad", ["promote", "np", "float16", "complex64", 3, None, "F32"])
def test_unknown_type_names_are_refused_with_the_accepted_ones(bad):
    with pytest.raises(ArgumentError, match="f32, f64, i32, i64"):
        as_dtype(bad)
    with pytest.raises(ArgumentError, match="dtype for 'A'"):
        pc.codegen(MATMUL, dtypes={"A": bad})
    with pytest.raises(ArgumentError):
        random_inputs(MATMUL, dtype=bad)


def test_testing_helpers_take_numpy_types():
    args = random_inputs(MATMUL, {"I": 2, "J": 3, "K": 4}, dtype=np.float32)
    assert args["A"].dtype == np.float32


@pytest.mark.parametrize("extent, match", [("M +* 2", "not an affine expression"), (2.5, "integer or a string"),
                                           (True, "integer or a string"), (pc.i32, "element type goes before"),
                                           (None, "integer or a string")])
def test_tensor_extents_that_are_not_sizes_are_refused(extent, match):
    for declare in (pc.tensor, pc.f32):
        with pytest.raises(ArgumentError, match=match):
            declare["N", extent]
    assert str(pc.f32["N", np.int64(3), "2*H + 1"].shape[1]) == "3"
