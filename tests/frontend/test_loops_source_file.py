"""A loop kernel's text comes from its file: a file edited since the function was defined holds
code Python does not run for it, and is refused rather than compiled."""
from __future__ import annotations

import pytest

from polyc.errors import ParseError
from polyc.frontend.pyloops import program_from_function


@pytest.mark.parametrize("edit", ["lines moved: another function there", "the body edited in place"])
def test_a_kernel_whose_file_was_edited_since_import_is_refused(tmp_path, monkeypatch, edit):
    """polyc reads a loop kernel's text from its file: an edited file holds code Python does not
    run for the function, and the kernel would silently compute that instead."""
    import importlib
    import sys
    module = tmp_path / "edited_kernels.py"
    module.write_text("import polyc as pc\n\ndef scale(A: pc.f64['N'], B: pc.f64['N']):\n"
                      "    for i in range(N):\n        B[i] = A[i] * 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("edited_kernels", None)
    scale = importlib.import_module("edited_kernels").scale
    assert program_from_function(scale).name == "scale"   # unedited: fine
    if edit.startswith("lines"):
        module.write_text("import polyc as pc\n\ndef other(A: pc.f64['N'], B: pc.f64['N']):\n"
                          "    for i in range(N):\n        B[i] = A[i] - 100.0\n")
    else:
        module.write_text("import polyc as pc\n\ndef scale(A: pc.f64['N'], B: pc.f64['N']):\n"
                          "    for i in range(N):\n        B[i] = A[i] + 2.0\n")
    with pytest.raises(ParseError, match="no longer holds the code of scale that Python runs"):
        program_from_function(scale)
