"""The stages find their Jupyter views in `polyc.display`, where `polyc.viz` registers them."""
from __future__ import annotations

import pytest

import polyc as pc
from polyc import display
from polyc.viz.html import dependences_html, kernel_html, schedule_html


def test_repr_html_uses_the_registered_views():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_views")
    s = k.schedule().parallel("i")
    assert k._repr_html_() == kernel_html(k)
    assert s._repr_html_() == schedule_html(s)
    assert k.dependences()._repr_html_() == dependences_html(k.dependences())


def test_an_unregistered_kind_shows_its_escaped_repr(monkeypatch):
    monkeypatch.setattr(display, "_RENDERERS", {})
    k = pc.kernel("B[i] = A[i] * 2.0", name="lt_gt")
    assert k._repr_html_() == "<pre>" + repr(k).replace("<", "&lt;").replace(">", "&gt;") + "</pre>"


def test_unknown_kinds_are_refused():
    with pytest.raises(ValueError, match="unknown kind"):
        display.register_html("graph", str)
