"""Scoring the agent's submissions, and nothing else: the grading API (``grader``, served over
HTTP by ``server``; the agent's side is ``client``, a standard-library file shipped into the
sandbox), its append-only ledger (``ledger``), taking a submission out of the agent's reach and
scoring it (``artifacts``, ``loading``, ``limits``), what it may tell the agent (``answers``),
the agent's code at each submission (``recording``), the behavioural contamination check
(``twin``) and ``a2rl score`` (``score``). Grading receives composed config: it never runs
Hydra. Imports ``a2rl.task`` and the packages below it."""

from a2rl import lazy_face

# name -> the module that defines it, imported on first use (every `a2rl` command imports this
# package, ``a2rl submit`` and ``--help`` too, and most need little of it)
_FACE = {
    "artifact_bytes": "artifacts", "score_artifact": "artifacts", "stored_artifact":
    "artifacts", "GraderSettings": "grader", "GradingServer": "grader", "GradingService":
    "grader", "recover_inflight": "grader", "Ledger": "ledger", "grading_totals": "ledger",
    "CodeRecorder": "recording", "record_final_code": "recording", "select_files": "recording",
    "submit": "client", "draw_seed": "twin", "not_checked": "twin", "verdict": "twin",
}
__all__ = sorted(_FACE)
__getattr__ = lazy_face(__name__, _FACE)
