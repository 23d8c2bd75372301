"""Every error and warning polyc raises is reachable as `pc.<Name>`, as the README writes them."""
import inspect

import pytest

import polyc as pc
from polyc import errors


def test_every_error_and_warning_class_is_exported():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if c.__module__ == errors.__name__ and issubclass(c, (errors.PolycError, errors.PolycWarning))]
    assert len(classes) > 20
    for c in classes:
        assert getattr(pc, c.__name__) is c and c.__name__ in pc.__all__, c.__name__


def test_einstein_names_may_be_unicode_identifiers():
    import numpy as np
    k = pc.kernel("Ä[i] +=! Ö[i, k] * α")
    np.testing.assert_array_equal(k(Ö=np.ones((2, 3)), α=2.0), [6.0, 6.0])
    assert "Ö" not in pc.codegen(k) and "α" not in pc.codegen(k)        # spelled in ASCII in C
    with pytest.raises(pc.ParseError, match="unexpected character '²'"):
        pc.kernel("B[i] = A[i] * 2²")
