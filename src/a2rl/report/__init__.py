"""What people read: the static HTML report (``html``), its figures (``plots``), the routes
agents took (``routes``), screenshots of the report (``screenshot``) and the optional LLM-written
narrative of a run (``narrative``)."""

from a2rl.report.html import build_report

__all__ = ["build_report"]
