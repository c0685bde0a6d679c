"""Running the benchmark: the stages of one cell as plain functions of one composed config
(``stages``), one agent run (``runner``, with ``network``, ``supervisor`` and
``grader_process`` for the grader's own process), what the pipeline lends a task
(``harness``), what the workflow's jobs call (``jobs``, ``cell``), the ``a2rl`` command
(``cli``, with ``doctor``, ``timings``, ``scaffold``, ``agent_plugins`` and
``agent_settings``), and each rule's cluster resources (``resources``, ``plancache``). The top
of the package order: it may import every package, and only it imports ``a2rl.agents``.

The workflow (workflow/scripts/) and studies import from here, never from ``cli``."""

from a2rl import lazy_face

# name -> the module that defines it, imported on first use (every `a2rl` command imports this
# package, ``a2rl submit`` and ``--help`` too, and most need little of it)
_FACE = {
    "run_cell": "cell", "STAGES": "jobs", "run_leaderboard": "jobs", "run_report": "jobs",
    "run_stages": "jobs", "run_prepare_model": "jobs", "stage_function": "jobs",
    "ComposeCache": "plancache", "check_agent_sizing": "resources",
    "resource_keys": "resources", "rule_resources": "resources", "layout_of": "stages",
    "load_task_of": "stages", "prepare_model": "stages", "prepare_task": "stages", "run_paths":
    "stages", "write_rollouts": "stages",
}
__all__ = sorted(_FACE)
__getattr__ = lazy_face(__name__, _FACE)
