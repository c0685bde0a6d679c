"""AlpacaEval 2.0's metrics, computed by the ``alpaca_eval`` package's own code: the raw win rate
and its standard error (``metrics.get_winrate``) and the length-controlled win rate
(``metrics.glm_winrate.get_length_controlled_winrate``, a GLM with the length difference as a
feature, predicted at zero length difference).

The GLM fetches precomputed files from the Hugging Face dataset ``tatsu-lab/alpaca_eval`` at run
time: ``df_gamed.csv`` (annotations of two length-gamed baselines, and each instruction's
difficulty) and, for ``predict_winrate``, ``instruction_difficulty.csv``. They were never in the
GitHub repository. ``hub_files`` maps those names to local copies (by default the ones `a2rl data
fetch alpacaeval` installs under ``paths.data``/alpacaeval/: ``installed_hub_files``); a name
without a copy is fetched from the Hub as alpaca_eval does, and a failure names the missing file
(``MissingHubFile``).

GLMs (``alpaca_eval.metrics.glm_winrate.GLM_INFO``):

* ``length_controlled_v1``: AlpacaEval 2.0's LC win rate (length, instruction difficulty,
  regularised towards the gamed baselines). Needs ``df_gamed.csv``.
* ``length_controlled_minimal``: length only, no difficulty, no regularisation. alpaca_eval reads
  ``df_gamed.csv`` before looking at the formula; the formula never uses it, so without the
  file a neutral frame (the same instruction indices, difficulty 0) stands in and the result is
  exactly alpaca_eval's minimal GLM. Used by the offline smoke variant.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import math
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

GLMS = ("length_controlled_v1", "length_controlled_noreg", "length_controlled_minimal")
# GLMs whose formula reads the instruction difficulty (they cannot run on a stand-in frame)
NEEDS_DIFFICULTY = ("length_controlled_v1", "length_controlled_noreg")
HUB_REPO = "tatsu-lab/alpaca_eval"
REFERENCE_GENERATOR = "gpt4_1106_preview"
# the files the GLM downloads from HUB_REPO, as tasks/alpacaeval/data.yaml installs them
HUB_FILES = ("df_gamed.csv", "instruction_difficulty.csv")
ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"


class MissingHubFile(RuntimeError):
    """A file alpaca_eval's GLM downloads from the Hub is neither configured locally nor
    downloadable."""

    def __init__(self, filename: str, cause: BaseException | None = None):
        self.hub_file = filename
        super().__init__(
            f"the length-controlled GLM needs {filename!r} from the Hugging Face dataset "
            f"{HUB_REPO} (it is not in the alpaca_eval package or its GitHub repository); "
            f"download it once (huggingface-cli download --repo-type dataset {HUB_REPO} "
            f"{filename}) and name the copy in task.params.hub_files ({filename}: PATH) or "
            f"`--hub-file {filename}=PATH`"
            + (f" ({type(cause).__name__}: {cause})" if cause else ""))


def installed_hub_files(data_root: Path) -> dict[str, Path]:
    """The GLM's Hub files installed under ``data_root``/alpacaeval/ (`a2rl data fetch
    alpacaeval`), by name; those absent are left out (the GLM then asks the Hub)."""
    folder = Path(data_root) / "alpacaeval"
    return {name: folder / name for name in HUB_FILES if (folder / name).is_file()}


@contextlib.contextmanager
def _pkg_resources_for_import() -> Iterator[None]:
    """alpaca_eval.utils imports ``pkg_resources`` for two version helpers; setuptools >= 81
    no longer ships it. While alpaca_eval is imported, a stand-in with those two helpers (from
    packaging and importlib.metadata) is in sys.modules; it is taken out afterwards (alpaca_eval
    keeps its own reference), because other code in the process takes whatever is there for
    the real one (pytest's syspath_prepend calls pkg_resources.fixup_namespace_packages). A
    real pkg_resources is left alone."""
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        pass
    else:
        yield
        return
    from packaging.version import parse

    shim = types.ModuleType("pkg_resources")
    shim.parse_version = parse
    shim.get_distribution = lambda name: types.SimpleNamespace(
        version=importlib.metadata.version(name))
    sys.modules["pkg_resources"] = shim
    try:
        yield
    finally:
        if sys.modules.get("pkg_resources") is shim:
            del sys.modules["pkg_resources"]


def alpaca_eval_metrics():
    """The ``alpaca_eval.metrics`` module (imported lazily: it pulls in pandas, sklearn...)."""
    with _pkg_resources_for_import():
        from alpaca_eval import metrics

    return metrics


def _glm_module():
    alpaca_eval_metrics()
    from alpaca_eval.metrics import glm_winrate

    return glm_winrate


@contextlib.contextmanager
def hub_files_from(local: Mapping[str, str | Path], stand_in: Mapping[str, Path] = {}
                   ) -> Iterator[None]:
    """Within the block, alpaca_eval's GLM gets ``local[filename]`` (else ``stand_in``, else a
    real Hub download) instead of its ``hf_hub_download`` call; a file it cannot get raises
    MissingHubFile naming it."""
    glm = _glm_module()
    real = glm.hf_hub_download

    def download(repo_id: str, filename: str, **kwargs: Any) -> str:
        if filename in local:
            path = Path(local[filename]).expanduser()
            if not path.is_file():
                raise MissingHubFile(filename, FileNotFoundError(f"{path} does not exist"))
            return str(path)
        if filename in stand_in:
            return str(stand_in[filename])
        try:
            return real(repo_id=repo_id, filename=filename, **kwargs)
        except Exception as err:  # offline, gated, renamed: say which file, not a stack
            raise MissingHubFile(filename, err) from err

    glm.hf_hub_download = download
    try:
        yield
    finally:
        glm.hf_hub_download = real


def _neutral_df_gamed(folder: Path, indices: list[int]) -> Path:
    """A df_gamed.csv with no gamed annotations and difficulty 0: read but never used by a GLM
    whose formula has no difficulty term and no regularisation (``length_controlled_minimal``)."""
    import pandas as pd

    path = folder / "df_gamed.csv"
    n = max(indices) + 1 if indices else 1
    pd.DataFrame({"model": "none", "index": range(n), "instruction_difficulty": 0.0,
                  "preference": 0.5, "std_delta_len": 0.0,
                  "not_gamed_baseline": True}).to_csv(path, index=False)
    return path


def annotations_frame(rows: list[dict[str, Any]]):
    """A DataFrame alpaca_eval's metrics accept. Its index is each row's ``index`` (the
    instruction's position among the 805; the GLM looks difficulty up by it), else the row's
    position."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if "index" in frame.columns:
        frame = frame.set_index("index")
    frame.index.name = None
    return frame


def compute_metrics(rows: list[dict[str, Any]], glm: str = "length_controlled_v1",
                    hub_files: Mapping[str, str | Path] | None = None,
                    losses: Sequence[bool] | None = None) -> dict[str, Any]:
    """win_rate, standard_error, n_total, avg_length (of output_2, characters) and the GLM's
    length_controlled_winrate and lc_standard_error for annotations ``rows`` (alpaca_eval's
    format: instruction, output_1 = baseline, output_2 = model, generator_1, generator_2,
    preference in [1, 2]). ``glm_preferences`` holds the per-row predicted preference
    (P(model better)); their mean x 100 is the LC win rate.

    ``losses[i]`` marks a row that loses outright (an empty reply): it counts in the raw win
    rate, and in the LC win rate as 0, but it is not fitted by the GLM, which would otherwise
    put its loss down to its length and forgive it. Raises MissingHubFile when the GLM needs a
    file it cannot get."""
    if glm not in GLMS:
        raise ValueError(f"glm={glm!r}; expected one of {GLMS}")
    metrics = alpaca_eval_metrics()
    frame = annotations_frame(rows)
    out = _plain(metrics.get_winrate(frame))
    out["avg_length"] = int(frame["output_2"].str.len().mean())
    lost = [bool(x) for x in (losses or [False] * len(frame))]
    fitted = frame[[not x for x in lost]].copy()
    predicted = iter(_glm_preferences(fitted, glm, hub_files) if len(fitted) else [])
    glm_preferences = [0.0 if x else next(predicted) for x in lost]
    out["length_controlled_winrate"] = 100.0 * sum(glm_preferences) / len(glm_preferences)
    out["lc_standard_error"] = _sem(glm_preferences)
    out["glm"] = glm
    out["glm_preferences"] = glm_preferences
    return out


def _glm_preferences(frame, glm: str, hub_files: Mapping[str, str | Path] | None
                     ) -> list[float]:
    """alpaca_eval's GLM prediction for each row at zero length difference. When every row has
    the same preference there is nothing to fit (sklearn would see one class and answer 0.5
    for all), and with fewer rows than the GLM's cross-validation folds it cannot be fitted:
    then each row keeps its preference (the LC win rate is the raw one)."""
    import tempfile

    preferences = frame["preference"].astype(float)
    folds = _glm_module().GLM_INFO[glm]["kwargs"].get("n_splits", 0)
    if preferences.nunique() <= 1 or len(frame) < folds:
        return [float(p) - 1.0 if p else 0.5 for p in preferences]
    with tempfile.TemporaryDirectory(prefix="a2rl-glm-") as tmp:
        stand_in = {} if glm in NEEDS_DIFFICULTY else {
            "df_gamed.csv": _neutral_df_gamed(Path(tmp), [int(i) for i in frame.index])}
        with hub_files_from(hub_files or {}, stand_in), _quiet_glm():
            _glm_module().get_length_controlled_winrate(
                frame, glm_name=glm, save_weights_dir=None, is_warn_extreme_changes=False)
    return [float(x) for x in frame["glm_preference"]]


def _sem(values: list[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    return 100.0 * math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


@contextlib.contextmanager
def _quiet_glm() -> Iterator[None]:
    """sklearn's convergence warnings would flood a grader log, and liblinear prints its own
    warnings from C to file descriptor 1, where `a2rl score` writes its JSON: send fd 1 to
    stderr while the GLM is fitted."""
    import os
    import warnings

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    """numpy scalars to Python numbers, so the result serialises to JSON."""
    out = {}
    for key, value in values.items():
        out[key] = value.item() if hasattr(value, "item") else value
    return out


def load_annotations(path: Path) -> list[dict[str, Any]]:
    """An alpaca_eval annotations file: a JSON list (or JSON lines) of annotation rows."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ValueError(f"{path}: expected a JSON list of annotation objects")
    missing = [k for k in ("output_1", "output_2", "preference") if data and k not in data[0]]
    if missing:
        raise ValueError(f"{path}: annotations lack {missing} (alpaca_eval's annotations.json "
                         f"format: instruction, output_1, output_2, preference, ...)")
    for key in ("generator_1", "generator_2"):  # the GLM needs them; older files lack them
        for row in data:
            row.setdefault(key, REFERENCE_GENERATOR if key == "generator_1" else "model")
    return data


SUMMARY_KEYS = ("win_rate", "standard_error", "length_controlled_winrate", "n_total",
                "avg_length")


def score_annotations(path: Path, glm: str = "length_controlled_v1",
                      hub_files: Mapping[str, str | Path] | None = None) -> dict[str, Any]:
    """The leaderboard's numbers for an annotations file. When the GLM lacks a Hub file, the
    object says so (``length_controlled_winrate`` None, ``length_controlled_error`` naming the
    file) instead of failing: the raw win rate needs nothing from the Hub."""
    rows = load_annotations(Path(path))
    try:
        full = compute_metrics(rows, glm, hub_files)
        error = None
    except MissingHubFile as err:
        metrics = alpaca_eval_metrics()
        full = _plain(metrics.get_winrate(annotations_frame(rows)))
        full["avg_length"] = int(annotations_frame(rows)["output_2"].str.len().mean())
        full |= {"length_controlled_winrate": None, "lc_standard_error": None, "glm": glm}
        error = str(err)
        logging.getLogger(__name__).warning("%s", err)
    out = {k: full.get(k) for k in SUMMARY_KEYS}
    out |= {"lc_standard_error": full.get("lc_standard_error"), "glm": glm,
            "n_wins": full.get("n_wins"), "n_wins_base": full.get("n_wins_base"),
            "n_draws": full.get("n_draws"), "discrete_win_rate": full.get("discrete_win_rate")}
    if error:
        out["length_controlled_error"] = error
    return out
