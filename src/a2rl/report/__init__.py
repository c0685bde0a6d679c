"""What people read: each run's summary.md (``markdown``), the static HTML report (``html``:
the index; ``run_page``: a run's page; ``html_parts``: their pieces), its figures (``plots``),
screenshots of the report (``screenshot``) and the optional LLM-written narrative of a run
(``narrative``). Both renderers draw a run from its ``RunSummary`` and the texts of
``a2rl.analysis.view``."""

from .html import build_report
from .live import COOKIE, INDEX_FIGURES, make_server
from .markdown import write_markdown
from .narrative import write_narrative
from .screenshot import screenshot_report

__all__ = [
    "COOKIE", "INDEX_FIGURES", "build_report", "make_server", "screenshot_report",
    "write_markdown", "write_narrative",
]
