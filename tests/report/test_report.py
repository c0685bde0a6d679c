"""What people read, checked the way they read it: summary.md of real runs, the static HTML
report rendered in headless Chromium (tables, plots, links), the documented screenshot command,
``dvc metrics show`` / ``dvc plots show``, ``snakemake --report`` and the optional narrative.

Screenshots are kept as test artifacts in $A2RL_TEST_ARTIFACTS (default
results/test-artifacts/report/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from a2rl.common.files import iter_jsonl, read_json
from a2rl.config.types import ConfigError, DriverConfig, PricesConfig
from a2rl.grading import recording
from a2rl.report.narrative import write_narrative
from chat_stub import ChatStub
from checkout import REPO, child_env

pytestmark = pytest.mark.integration

ARTIFACTS = Path(os.environ.get("A2RL_TEST_ARTIFACTS")
                 or REPO / "results" / "test-artifacts") / "report"
PNG = b"\x89PNG\r\n\x1a\n"


def test_sft_summary_names_its_route_and_each_submissions_commit(runs):
    run = runs["runs"]["sft"]
    md = run.summary_md.read_text()
    assert "| Route | SFT |" in md
    route_rows = md.split("## Route")[1].split("## Submissions")[0]
    valid = [e for e in iter_jsonl(run.ledger) if e["valid"]]
    assert valid
    for entry in valid:
        assert re.search(rf"\| {entry['submission_id']} \| `{entry['code_commit'][:10]}` \| "
                         r"SFT \| code/train\.py:\d+", route_rows), route_rows
    summary = read_json(run.summary_json)
    assert summary["route"]["methods"] == ["SFT"]
    assert [i["parent"] for i in summary["submissions"]["items"]][0] == "base"
    assert summary["process"]["valid_rate"] == 1.0
    assert summary["process"]["time_to_first_valid_s"] == valid[0]["elapsed_s"]
    assert summary["process"]["copy_of_base"] == 0 and summary["cost_usd"] == 0.0
    assert "diff submission-1 submission-2" in md or len(valid) == 1
    noop = read_json(runs["runs"]["noop"].summary_json)
    assert noop["route"]["methods"] == ["copy"] and noop["process"]["copy_of_base"] == 1


# ---------------------------------------------------------------------------------- browser


def visible_check(driver, page: Path) -> dict:
    """Open ``page`` and return what a person would see: title, headings, tables (as rows of
    cell texts), images (loaded or not), links (target files exist or not)."""
    from selenium.webdriver.common.by import By

    driver.get(page.resolve().as_uri())
    images = driver.execute_script(
        "return Array.from(document.images).map(i => [i.getAttribute('src'), "
        "i.complete && i.naturalWidth > 0, i.getBoundingClientRect().width])")
    links = []
    for a in driver.find_elements(By.CSS_SELECTOR, "a[href]"):
        url = urlparse(a.get_attribute("href"))
        target = Path(unquote(url.path))
        links.append((a.get_attribute("href"), url.scheme, target.is_file()))
    tables = []
    for t in driver.find_elements(By.TAG_NAME, "table"):
        tables.append([[c.text for c in row.find_elements(By.CSS_SELECTOR, "th, td")]
                       for row in t.find_elements(By.TAG_NAME, "tr")])
    return {"title": driver.title,
            "h1": driver.find_element(By.TAG_NAME, "h1").text,
            "h2": [h.text for h in driver.find_elements(By.TAG_NAME, "h2")],
            "text": driver.find_element(By.TAG_NAME, "body").text,
            "images": images, "links": links, "tables": tables}


def assert_page_is_whole(seen: dict) -> None:
    assert seen["images"], "no plot on the page"
    for src, loaded, width in seen["images"]:
        assert loaded and width > 100, f"image {src} did not render"
    for href, scheme, exists in seen["links"]:
        assert scheme == "file" and exists, f"link {href} does not resolve (report is offline)"


def test_html_report_renders_in_headless_chromium(runs, browser):
    from selenium.webdriver.common.by import By

    report = runs["layout"].report
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    index = visible_check(browser, report / "index.html")
    assert index["h1"] == "Agent² RL-Bench report"
    assert {"Leaderboard", "Score against budget", "By level", "Runs"} <= set(index["h2"])
    assert_page_is_whole(index)
    # the task cell links to its deviations row (docs/deviations.md), and it resolves (above)
    assert any(href.endswith("docs/deviations.md#gsm8k") for href, _, _ in index["links"])
    board = index["tables"][0]
    assert board[0][:5] == ["grid", "task", "level", "agent", "driver"] and "ci_low" in board[0]
    assert board[0].index("auc") == board[0].index("ci_high") + 1  # next to the final score
    assert sorted(row[3] for row in board[1:]) == ["cheater", "noop", "sft"]
    runs_table = index["tables"][-1]
    assert len(runs_table) == 1 + 3
    cheater_row = next(r for r in runs_table if "cheater" in r[0])
    assert "contaminated" in cheater_row[-1]
    browser.save_screenshot(str(ARTIFACTS / "leaderboard.png"))

    # a person clicks through to the sft run
    browser.find_element(By.LINK_TEXT, "gsm8k_arith__sft__none__seed0").click()
    assert browser.current_url.endswith("runs/gsm8k_arith__sft__none__seed0.html")
    page = report / "runs" / "gsm8k_arith__sft__none__seed0.html"
    seen = visible_check(browser, page)
    assert seen["h1"] == "gsm8k_arith · sft · none · seed 0"
    for heading in ("Outcome", "Score over time", "Process", "Route", "Submissions",
                    "Code revisions", "Failures", "Integrity", "Timeline"):
        assert heading in seen["h2"]
    assert_page_is_whole(seen)
    assert "Methods used: SFT" in seen["text"]
    commits = recording.commits(runs["runs"]["sft"].code_repo)
    revisions = next(t for t in seen["tables"] if t[0][:2] == ["commit", "tags"])
    assert [r[0] for r in revisions[1:]] == [c["commit"][:10] for c in commits]
    diffs = browser.find_elements(By.CSS_SELECTOR, "details.revision")
    assert len(diffs) == len(commits)  # every revision is tagged: submissions and final
    assert "SFTTrainer" in diffs[0].find_element(By.TAG_NAME, "pre").text  # opened
    browser.set_window_size(1280, 3000)
    browser.save_screenshot(str(ARTIFACTS / "run_sft.png"))
    browser.set_window_size(1280, 1600)

    cheater = visible_check(browser, report / "runs" / "gsm8k_arith__cheater__none__seed0.html")
    assert_page_is_whole(cheater)
    assert "FLAGGED" in cheater["text"] and runs["planted"][0] in cheater["text"]
    noop = visible_check(browser, report / "runs" / "gsm8k_arith__noop__none__seed0.html")
    assert_page_is_whole(noop)
    assert "Methods used: copy" in noop["text"] and "not flagged" in noop["text"]


def test_screenshot_command_writes_pngs(runs, tmp_path):
    if not shutil.which("chromium"):
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    from PIL import Image

    out = tmp_path / "shots"
    result = subprocess.run([sys.executable, "-m", "a2rl.pipeline.cli", "report", "--all",
                             "--screenshots", str(out), "grid=ci", f"paths.root={runs['root']}"],
                            capture_output=True, text=True, env=child_env(), timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    index = runs["layout"].report / "index.html"
    assert result.stdout.split() == [str(index), str(out / "leaderboard.png"),
                                     str(out / "run.png")]
    for name, height in (("leaderboard.png", 1400), ("run.png", 3000)):
        assert (out / name).read_bytes()[:8] == PNG
        with Image.open(out / name) as image:
            assert image.size == (1280, height)
            colours = image.convert("L").getextrema()
            assert colours[0] < 100 < colours[1]  # text on a light page, not a blank one
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(out / name, ARTIFACTS / f"command_{name}")


# -------------------------------------------------------------------------- dvc, snakemake


def test_dvc_shows_the_leaderboard_metrics_and_the_trajectories(runs, tmp_path):
    root = tmp_path / "dvc"
    copied = root / "results" / "ci"  # where dvc.yaml's stage (the ci grid) files its results
    copied.mkdir(parents=True)
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    results = runs["layout"].results
    for name in ("leaderboard.json", "leaderboard.csv", "budget_curves.csv"):
        shutil.copy(results / name, copied / name)
    shutil.copytree(results / "report", copied / "report")
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=root, check=True)
    shutil.copytree(REPO / ".dvc" / "plots", root / ".dvc" / "plots")  # the band's template
    metrics = subprocess.run(["dvc", "metrics", "show", "--json"], cwd=root, env=child_env(),
                             capture_output=True, text=True, check=True).stdout
    [workspace] = json.loads(metrics).values()  # keyed "" without git, "workspace" with it
    shown = workspace["data"]["results/ci/leaderboard.json"]["data"]
    assert shown["gsm8k_arith"]["sft"]["none"]["n_seeds"] == 1
    assert shown["levels"]["L1"]["noop"]["none"]["n_tasks"] == 1
    plots = subprocess.run(["dvc", "plots", "show", "--json"], cwd=root, env=child_env(),
                           capture_output=True, text=True, check=True).stdout
    data = json.loads(plots)["data"]
    assert "results/ci/leaderboard.csv" in data
    trajectory = data["results/ci/report/trajectories/gsm8k_arith__sft__none__seed0.csv"][0]
    assert trajectory["content"]["encoding"]["x"]["field"] == "elapsed_s"
    assert [float(p["best_score"]) for p in trajectory["content"]["data"]["values"]]
    [budget] = data["results/ci/budget_curves.csv"]
    curve = [v for v in budget["content"]["data"]["values"] if v["agent"] == "sft"]
    assert curve[0]["fraction"] == "0.0000" and curve[-1]["fraction"] == "1.0000"
    # one seed: the mean is the run's own curve, and there is no band to draw
    assert {v["band_low"] for v in curve} == {""} and {v["n_seeds"] for v in curve} == {"1"}


def test_snakemake_report_collects_the_rules_outputs(runs, tmp_path):
    out = tmp_path / "report.zip"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(runs["root"]), "--cores", "1", "--config", "grid=ci",
         # the runs fixture holds the ci grid's gsm8k_arith cells only
         'overrides=["grid.tasks=[gsm8k_arith]"]', "--report", str(out)],
        capture_output=True, text=True, env=child_env(), timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    names = zipfile.ZipFile(out).namelist()
    assert any(n.endswith("/report.html") for n in names)
    assert any(n.endswith("/leaderboard.csv") for n in names)
    assert sum(n.endswith("/summary.md") for n in names) == 2  # noop and sft
    assert any(n.endswith("/index.html") for n in names)
    assert any(n.endswith("runs/gsm8k_arith__sft__none__seed0.html") for n in names)


# --------------------------------------------------------------------------------- narrative


def test_narrative_is_optional_and_goes_through_the_driver(runs, tmp_path, monkeypatch):
    run = runs["runs"]["sft"]
    summary_md = tmp_path / "summary.md"
    shutil.copy(run.summary_md, summary_md)
    with ChatStub("The agent fine-tuned with SFT twice.") as chat:
        driver = DriverConfig(name="stub", provider="openai", model="judge-1",
                              base_url=chat.base_url, api_key_env="A2RL_TEST_NARRATIVE_KEY",
                              prices=PricesConfig(free=True))
        monkeypatch.delenv("A2RL_TEST_NARRATIVE_KEY", raising=False)
        with pytest.raises(ConfigError, match="A2RL_TEST_NARRATIVE_KEY"):
            write_narrative(summary_md, driver)
        monkeypatch.setenv("A2RL_TEST_NARRATIVE_KEY", "secret")
        out = write_narrative(summary_md, driver)
    assert out == tmp_path / "narrative.md"
    assert "The agent fine-tuned with SFT twice." in out.read_text()
    [request] = chat.seen
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer secret"
    assert request["body"]["model"] == "judge-1"
    # the summary whole, fenced as data (tests/attacks/test_narrative_injection_attacks.py)
    assert f"\n{summary_md.read_text()}\n</run-summary-" in request["body"]["messages"][1][
        "content"]
    # off by default: the pipeline's runs have no narrative
    assert not (run.root / "narrative.md").exists()


def test_a2rl_report_command_rebuilds_the_report(runs, tmp_path):
    root = runs["root"]
    index = runs["layout"].report / "index.html"
    before = index.stat().st_mtime_ns
    result = subprocess.run([sys.executable, "-m", "a2rl.pipeline.cli", "report", "--all",
                             "grid=ci", f"paths.root={root}"], capture_output=True, text=True,
                            env=child_env(), timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(index)
    assert index.stat().st_mtime_ns > before
    pages = sorted(p.name for p in (index.parent / "runs").glob("*.html"))
    assert pages == [f"gsm8k_arith__{a}__none__seed0.html" for a in ("cheater", "noop", "sft")]
