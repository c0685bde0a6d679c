"""What people read: each run's summary.md (``markdown``), the static HTML report (``html``:
the index; ``run_page``: a run's page; ``html_parts``: their pieces), its figures (``plots``),
screenshots of the report (``screenshot``) and the optional LLM-written narrative of a run
(``narrative``). Both renderers draw a run from its ``RunSummary`` and the texts of
``a2rl.analysis.view``."""

from a2rl.report.html import build_report

__all__ = ["build_report"]
