"""Where the Jupyter views of polyc's values are found: a registry of HTML renderers.

The values of every stage (kernels, dependences, schedules, compiled kernels) have a
`_repr_html_` for Jupyter, but the views live in `polyc.viz`, which sits above the whole pipeline
and reads every stage.  So the stages do not import viz: `polyc.viz` registers its renderers here
when it is imported (the package root imports it), and `_repr_html_` looks them up by kind.  A
kind without a renderer shows its `repr`, escaped.
"""
from __future__ import annotations

import html
from typing import Any, Callable, Dict

#: The kinds of value that have a view.
KINDS = ("kernel", "dependences", "schedule", "compiled")

_RENDERERS: Dict[str, Callable[[Any], str]] = {}


def register_html(kind: str, render: Callable[[Any], str]) -> None:
    """Use `render(value) -> html` for `_repr_html_` of values of `kind` (one of `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of view {kind!r}; the kinds are {', '.join(KINDS)}")
    _RENDERERS[kind] = render


def html_of(kind: str, value: Any) -> str:
    """The HTML view of `value` by the renderer registered for `kind`, else its escaped `repr`."""
    render = _RENDERERS.get(kind)
    if render is None:
        return f"<pre>{html.escape(repr(value))}</pre>"
    return render(value)
