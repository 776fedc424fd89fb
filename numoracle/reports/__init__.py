"""Reports people look at: a self-contained ``report.html`` with pictures
(:func:`write_html`), and Hypothesis observability records for Tyche
(:func:`observing`)."""

from __future__ import annotations

from .html_report import write_html
from .observe import case_features, observing

__all__ = ["write_html", "observing", "case_features"]
