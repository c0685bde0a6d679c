"""The one place that knows where things live on disk.

results/
  prepared/{task}/            train data (agent-visible) and sealed/ splits (never in a workspace)
  cache/baseline/{key}.json   baseline scores, keyed by (task, model hash, test split hash)
  cache/tasks/{task}/         a task's own grading cache (e.g. judge verdicts, judge.sqlite)
  runs/{task}/{agent}/{driver}/seed{seed}/
      workspace/              what the agent sees (description.md, data/, base_model/, code/,
                              output/, scores.json)
      store/{sha256}/         submitted artifacts, copied and hashed before evaluation
      ledger.jsonl events.jsonl agent.log grader.log final.json summary.md summary.json
      config.json             the cell's resolved config, written as its agent phase starts
      llm_calls.jsonl transcript.jsonl agent/   LLM calls (a2rl.llm.proxy), the agent CLI's
                              transcript
      judge_calls.jsonl       calls of an API judge while grading (never the agent's spending)
      egress.jsonl            the sandbox's connections out under agent.network=allowlist
                              (a2rl.isolation.egress)
      code.git/               the agent's code at each submission and at the end
                              (a2rl.grading.recording)
      integrity.json          contamination and tamper checks (a2rl.analysis.integrity)
  models/{task}/{agent}/{driver}/seed{seed}/   each run's selected artifact, tracked by DVC
  report/                     the static HTML report (index.html, runs/, plots/, trajectories/)
  grid.json                   the grid's planned cells (written by the workflow as it starts)
  leaderboard.csv leaderboard.md leaderboard.json leaderboard_levels.csv budget_curves.csv
  logs/{rule}/{name}.log      the Snakemake jobs' logs (name: a task, a model or a cell's path)
resources/models/{model}/     prepared base models (HF folders), each with {model}.done beside it

The Snakefile's rules build their paths from here too, with wildcards for names
(``Layout(Path("results"), Path("resources")).run("{task}", "{agent}", "{driver}", "{seed}")``),
so each path is spelled once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def cell_path(task: str, agent: str, driver: str, seed: int | str) -> Path:
    """A cell's place below runs/, models/ and a rule's logs: task/agent/driver/seed<seed>."""
    return Path(task, agent, driver, f"seed{seed}")


@dataclass(frozen=True)
class PreparedTaskPaths:
    root: Path

    @property
    def data(self) -> Path:
        """Training data handed to the agent (copied into workspace/data)."""
        return self.root / "data"

    @property
    def sealed(self) -> Path:
        """Test and validation splits; never mounted into a sandbox."""
        return self.root / "sealed"

    @property
    def test(self) -> Path:
        return self.sealed / "test.jsonl"

    @property
    def validation(self) -> Path:
        return self.sealed / "validation.jsonl"

    @property
    def manifest(self) -> Path:
        return self.root / "prepared.json"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.jsonl"

    @property
    def evals(self) -> Path:
        """evals/<submission_id>.json: per-item results of each evaluated submission."""
        return self.root / "evals"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def agent_log(self) -> Path:
        return self.root / "agent.log"

    @property
    def grader_log(self) -> Path:
        """The grader process's own output, over its restarts (a2rl.pipeline.supervisor)."""
        return self.root / "grader.log"

    @property
    def local_server_log(self) -> Path:
        """The local driver's model server's output (a2rl.llm.local_driver)."""
        return self.root / "local_server.log"

    @property
    def final(self) -> Path:
        return self.root / "final.json"

    @property
    def summary_md(self) -> Path:
        return self.root / "summary.md"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    @property
    def config(self) -> Path:
        """The cell's resolved RunConfig, written when its agent phase starts, so that readers
        of a run still going (a2rl.report.live) can summarize it without composing conf/."""
        return self.root / "config.json"

    @property
    def run_json(self) -> Path:
        """Resolved config and timing of the agent phase (written by run_agent)."""
        return self.root / "run.json"

    @property
    def scores_mirror(self) -> Path:
        return self.workspace / "scores.json"

    @property
    def code_repo(self) -> Path:
        """Git repository of the agent's code revisions (outside the workspace)."""
        return self.root / "code.git"

    @property
    def integrity(self) -> Path:
        return self.root / "integrity.json"

    @property
    def llm_calls(self) -> Path:
        """One line per call of the agent to its driver LLM (a2rl.llm.proxy)."""
        return self.root / "llm_calls.jsonl"

    @property
    def judge_calls(self) -> Path:
        """One line per call the grader made to an API judge (a2rl.llm.proxy format)."""
        return self.root / "judge_calls.jsonl"

    @property
    def egress(self) -> Path:
        """One line per connection through the egress proxy (a2rl.isolation.egress)."""
        return self.root / "egress.jsonl"

    @property
    def transcript(self) -> Path:
        """The agent CLI's own structured transcript, as JSON lines (a2rl.llm.stacks)."""
        return self.root / "transcript.jsonl"

    @property
    def agent_files(self) -> Path:
        """Writable folder the agent CLI keeps its transcript and generated configs in."""
        return self.root / "agent"


@dataclass(frozen=True)
class Layout:
    results: Path
    resources: Path

    @classmethod
    def from_paths(cls, paths) -> "Layout":
        root = Path(paths.root)
        return cls(results=(root / paths.results).resolve(),
                   resources=(root / paths.resources).resolve())

    def prepared(self, task: str) -> PreparedTaskPaths:
        return PreparedTaskPaths(self.results / "prepared" / task)

    def baseline(self, task: str) -> Path:
        return self.results / "baseline" / task / "baseline.json"

    def baseline_cache(self, key: str) -> Path:
        return self.results / "cache" / "baseline" / f"{key}.json"

    def task_cache(self, task: str) -> Path:
        return self.results / "cache" / "tasks" / task

    def run(self, task: str, agent: str, driver: str, seed: int | str) -> RunPaths:
        return RunPaths(self.results / "runs" / cell_path(task, agent, driver, seed))

    def model(self, name: str) -> Path:
        return self.resources / "models" / name

    def model_done(self, name: str) -> Path:
        """Flag file written once the base model's folder is complete (the workflow's)."""
        return self.resources / "models" / f"{name}.done"

    def log(self, rule: str, name: str | Path) -> Path:
        """The log of a workflow job: ``name`` is its task, model or cell path."""
        return self.results / "logs" / rule / f"{name}.log"

    def base_model(self, model) -> Path:
        """The base model's folder: a configured path, or the provisioned resources/models/."""
        return Path(model.path) if model.source == "path" else self.model(model.name)

    @property
    def grid_plan(self) -> Path:
        """The grid's cells as the workflow planned them (written when a grid starts), so that
        ``a2rl status`` lists the cells not started yet (a2rl.analysis.status)."""
        return self.results / "grid.json"

    @property
    def leaderboard_csv(self) -> Path:
        return self.results / "leaderboard.csv"

    @property
    def leaderboard_md(self) -> Path:
        return self.results / "leaderboard.md"

    @property
    def leaderboard_json(self) -> Path:
        return self.results / "leaderboard.json"

    @property
    def leaderboard_levels_csv(self) -> Path:
        return self.results / "leaderboard_levels.csv"

    @property
    def budget_curves_csv(self) -> Path:
        """Best-so-far score against budget per (task, agent, driver) (a2rl.analysis)."""
        return self.results / "budget_curves.csv"

    def selected_model(self, task: str, agent: str, driver: str, seed: int | str) -> Path:
        """The selected artifact of a run, exported for DVC (selected.json, model/)."""
        return self.results / "models" / cell_path(task, agent, driver, seed)

    @property
    def report(self) -> Path:
        return self.results / "report"

    @property
    def report_lock(self) -> Path:
        """Held while the leaderboard and the report are written: cells finishing at once,
        the workflow's report rule and a user's `a2rl report` share those files."""
        return self.results / ".report.lock"
