"""Jupyter views of every stage: HTML for kernels, dependences, schedules and compiled code, and
matplotlib pictures of iteration domains, schedules and dependence graphs.

`polyc.viz.html` has no dependency beyond the standard library; `polyc.viz.plots` imports
matplotlib only when a picture is drawn.
"""
from .html import HTMLView, compiled_html, dependences_html, kernel_html, schedule_html, view
from ..schedule.outline import outline_text, schedule_outline

__all__ = ["view", "HTMLView", "kernel_html", "dependences_html", "schedule_html", "compiled_html", "outline_text",
           "schedule_outline", "plot_domain", "plot_schedule", "plot_dependence_graph"]


def __getattr__(name: str):
    # The plots import matplotlib; load them only when asked for.
    if name in ("plot_domain", "plot_schedule", "plot_dependence_graph"):
        from . import plots
        return getattr(plots, name)
    raise AttributeError(name)
