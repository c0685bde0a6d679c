"""Reading a run back after the fact: its summary (``summary``: one ``RunSummary``), what its
summary shows readers (``view``, for both renderers), what went wrong (``failures``), what became
of its artifacts (``lineage``), its integrity checks (``integrity``), the methods it used
(``routes``), its score against budget (``budget_curve``), its transcript as one timeline
(``transcripts``), the leaderboard over runs (``leaderboard``) and where each task's deviations
are documented (``deviations``). Imports ``a2rl.grading`` and the packages below it."""

# ruff: noqa: I001 (a face's imports are wrapped as a grid, sorted by hand: one name a line
# would repeat its callers' import lists line for line)
from .budget_curve import best_so_far
from .deviations import task_links
from .failures import EVENT_COLUMNS
from .leaderboard import (
    COLUMNS, LEVEL_COLUMNS, LEVEL_KEYS, SCORE_COLUMNS, build_leaderboard, curves_frame,
    discover_run_roots, grid_run_roots, leaderboard_frame, level_frame, load_summaries,
)
from .lineage import export_selected
from .status import grid_status, where_to_look, write_plan
from .summary import summarize, summarize_run
from .transcripts.timeline import Entry, run_timeline
from .view import (
    IntegrityView, Line, Span, Table, final_note, integrity_view, network_view, number,
    route_text, share,
)

__all__ = [
    "COLUMNS", "EVENT_COLUMNS", "LEVEL_COLUMNS", "LEVEL_KEYS", "SCORE_COLUMNS", "Entry",
    "IntegrityView", "Line", "Span", "Table", "best_so_far", "build_leaderboard",
    "curves_frame", "discover_run_roots", "export_selected", "final_note", "grid_run_roots",
    "integrity_view", "leaderboard_frame", "level_frame", "load_summaries", "network_view",
    "number", "route_text", "run_timeline", "share", "summarize_run", "task_links",
    "grid_status", "summarize", "where_to_look", "write_plan",
]
