"""``a2rl data``: the tasks' official files fetched from an HTTP server on loopback (real sockets,
Range requests, a connection cut mid-file), checked against the manifests' checksums, laid out
under paths.data, exported and installed again with --from, and read by each task.

The server holds small files in each official format: WebShop's three JSON files and its query
map (tests/fixtures/webshop), ALFWorld's json_2.1.1 tree as the release's zip
(tests/fixtures/alfworld), DeepSearchQA's CSV, GSM8K's jsonl (tests/fixtures/data/gsm8k) and
alpaca_eval's Hub files. The manifests are the repository's (tasks/<pkg>/data.yaml) with their
checksums set to these files', so the layout under test is the real one.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import http.server
import io
import json
import random
import threading
import zipfile
from pathlib import Path

import pytest

from a2rl.data import command
from a2rl.data.install import grid_data_problems, read_record
from a2rl.data.manifest import DataError, Manifests, load_manifests
from a2rl.task.base import load_task
from checkout import FIXTURE_DATA, FULL_DATA, REPO, prepare_in

WEBSHOP = REPO / "tests" / "fixtures" / "webshop"
ALFWORLD = REPO / "tests" / "fixtures" / "alfworld"
# DeepSearchQA's published columns; fields with commas, quotes and a line break, as CSV allows
DSQA_ROWS = [{"problem": f"Which {i}, of the \"listed\" items\nqualifies?",
              "problem_category": ["Geography", "Finance & Economics"][i % 2],
              "answer": "" if i == 4 else f"item {i}, item {i + 1}",
              "answer_type": ["Single Answer", "Set Answer"][i % 2]} for i in range(12)]


class Server(http.server.ThreadingHTTPServer):
    """Serves ``root`` over loopback, honouring Range; ``cut`` (path -> bytes) closes the
    connection after that many body bytes once per path; ``ignore_range`` answers every
    request with the whole file; ``requests`` logs (path, Range header)."""

    def __init__(self, root: Path):
        super().__init__(("127.0.0.1", 0), Handler)
        self.root, self.cut, self.ignore_range, self.requests = root, {}, False, []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        server: Server = self.server
        rel = self.path.lstrip("/")
        server.requests.append((rel, self.headers.get("Range")))
        if rel.startswith("drive/"):  # Google Drive's answer when its quota is exceeded
            page = b"<html><body>Too many users have viewed or downloaded this file</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        path = server.root / rel
        if not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        start = 0
        ranged = self.headers.get("Range")
        if ranged and not server.ignore_range:
            start = int(ranged.removeprefix("bytes=").split("-")[0])
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = server.cut.pop(rel, None)
        self.wfile.write(body[start:cut] if cut is not None else body[start:])
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)


def dsqa_csv(rows: list[dict]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def glm_stand_ins(folder: Path, n: int) -> None:
    """df_gamed.csv and instruction_difficulty.csv in the Hub files' formats (columns as
    alpaca_eval's glm_winrate reads them), for instructions 0..n-1."""
    rng = random.Random(0)
    lines = ["model,index,preference,std_delta_len,instruction_difficulty,not_gamed_baseline"]
    lines += [f"gamed_{k},{i},{rng.random():.3f},{rng.uniform(-1, 1):.3f},"
              f"{(i % 7) / 7 - 0.5:.3f},False" for k in (1, 2) for i in range(n)]
    (folder / "df_gamed.csv").write_text("\n".join(lines) + "\n")
    (folder / "instruction_difficulty.csv").write_text(
        ",instruction_difficulty\n" + "".join(f"{i},{(i % 7) / 7 - 0.5:.3f}\n"
                                              for i in range(n)))


def make_mirror(root: Path) -> Path:
    """The mirror layout (each file at its manifest path; ALFWorld's archive beside its
    folder) with small files in the official formats."""
    files = {"webshop/items_shuffle_1000.json": WEBSHOP / "items_shuffle.json",
             "webshop/items_ins_v2_1000.json": WEBSHOP / "items_ins_v2.json",
             "webshop/items_human_ins.json": WEBSHOP / "items_human_ins.json",
             "webshop/goal_query_map.json": WEBSHOP / "goal_query_map.json",
             "gsm8k/train.jsonl": FIXTURE_DATA / "gsm8k" / "train.jsonl",
             "gsm8k/test.jsonl": FIXTURE_DATA / "gsm8k" / "test.jsonl"}
    for rel, src in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(src.read_bytes())
    (root / "deepsearchqa").mkdir()
    (root / "deepsearchqa" / "DSQA-full.csv").write_bytes(dsqa_csv(DSQA_ROWS))
    (root / "alfworld").mkdir()
    with zipfile.ZipFile(root / "alfworld" / "json_2.1.1_tw-pddl.zip", "w") as zipped:
        for path in sorted((ALFWORLD / "json_2.1.1").rglob("*")):
            zipped.write(path, path.relative_to(ALFWORLD).as_posix())
    (root / "alpacaeval").mkdir()
    reference = [{"instruction": f"Say {i}", "output": f"I say {i}.", "dataset": "t",
                  "generator": "gpt4_1106_preview"} for i in range(40)]
    (root / "alpacaeval" / "alpaca_eval_gpt4_baseline.json").write_text(json.dumps(reference))
    glm_stand_ins(root / "alpacaeval", 40)
    return root


def pinned_to(mirror: Path) -> Manifests:
    """The repository's manifests with each file's checksum and size those of the mirror's
    file (the layout and everything else as they are)."""
    real = load_manifests()
    datasets = {}
    for name, dataset in real.datasets.items():
        files = []
        for entry in dataset.files:
            served = mirror / entry.mirror_path
            if served.is_file():
                data = served.read_bytes()
                entry = dataclasses.replace(entry, sha256=hashlib.sha256(data).hexdigest(),
                                            size=len(data))
            files.append(entry)
        datasets[name] = dataclasses.replace(dataset, files=tuple(files))
    return Manifests(datasets, real.variants)


@pytest.fixture
def served(tmp_path, monkeypatch):
    mirror = make_mirror(tmp_path / "mirror")
    server = Server(mirror)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(command, "load_manifests", lambda: pinned_to(mirror))
    yield server
    server.shutdown()
    server.server_close()


def a2rl_data(*args: str) -> int:
    return command.main(list(args))


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".part" in p.name or ".unpack-" in p.name
            or ".old-" in p.name]


ALL = ("webshop", "alfworld", "deepsearchqa", "gsm8k", "alpacaeval")


def test_fetch_lays_out_each_dataset_where_its_task_reads_it(served, tmp_path, capsys):
    root = tmp_path / "data"
    assert a2rl_data("fetch", *ALL, "--mirror", served.url, f"paths.data={root}") == 0
    for rel in ("webshop/items_shuffle_1000.json", "webshop/items_human_ins.json",
                "deepsearchqa/DSQA-full.csv", "gsm8k/test.jsonl", "alpacaeval/df_gamed.csv",
                "alfworld/json_2.1.1/valid_unseen"):
        assert (root / rel).exists(), rel
    assert not (root / "alfworld" / "json_2.1.1_tw-pddl.zip").exists()  # unpacked, removed
    assert not leftovers(root)
    record = read_record(root, "alfworld")["files"]["alfworld/json_2.1.1"]
    assert record["pinned"] and len(record["tree_sha256"]) == 64
    capsys.readouterr()
    assert a2rl_data("status", "--json", f"paths.data={root}") == 0
    status = json.loads(capsys.readouterr().out)
    states = {d["dataset"]: d["state"] for d in status["datasets"]}
    assert all(states[name] == "installed" for name in ALL), states
    kinds = {t["task"]: t.get("kind") for t in status["tasks"]}
    assert kinds["household"] == kinds["gsm8k_arith"] == "offline variant"
    assert next(t for t in status["tasks"] if t["task"] == "alfworld")["data"] == "ready"


def test_each_task_prepares_from_the_fetched_files(served, tmp_path):
    from a2rl_tasks.alpacaeval.metric import installed_hub_files, score_annotations
    from a2rl_tasks.deepsearchqa.dsqa_data import load_dsqa, split_dsqa
    from a2rl_tasks.deepsearchqa.params import DsqaData

    from a2rl.config.types import TaskConfig

    root = tmp_path / "data"
    assert a2rl_data("fetch", *ALL, "--mirror", served.url, f"paths.data={root}") == 0
    # WebShop: the three JSON files and the query map, by the paper grid's paths
    webshop = TaskConfig(id="webshop", package="webshop", level="L3", params={
        "source": "webshop", "max_steps": 10, "train_goals": None, "test_goals": 500,
        **{key: str(root / "webshop" / name) for key, name in (
            ("product_file", "items_shuffle_1000.json"),
            ("attribute_file", "items_ins_v2_1000.json"),
            ("human_instruction_file", "items_human_ins.json"),
            ("query_file", "goal_query_map.json"))}})
    _, facts = prepare_in(load_task(webshop, root), tmp_path / "webshop")
    assert facts["source"]["goals"] == 6 and facts["expert_test"]["score"] == 100.0
    # ALFWorld: the unpacked json_2.1.1 tree under data_path alfworld
    alfworld = TaskConfig(id="alfworld", package="alfworld", level="L3", params={
        "source": "alfworld", "data_path": "alfworld", "test_games": None, "train_games": None,
        "max_steps": 12, "random_seeds": 1, "train_splits": ["train"]})
    _, facts = prepare_in(load_task(alfworld, root), tmp_path / "alfworld")
    assert facts["sizes"]["test"] >= 1
    # DeepSearchQA: the CSV as published (no example_id column: rows numbered from 0)
    rows, source = load_dsqa(DsqaData(train_size=4, test_size=6), root)
    assert source["path"].endswith("DSQA-full.csv") and len(rows) == 12
    assert rows[3]["problem"] == DSQA_ROWS[3]["problem"].strip() and rows[3]["example_id"] == "3"
    train, test, excluded = split_dsqa(rows, DsqaData(train_size=4, test_size=6))
    assert (len(train), len(test), excluded["example_ids"]) == (4, 6, ["4"])
    # AlpacaEval: with the two Hub files installed, the length-controlled win rate is computed
    rng = random.Random(1)
    annotations = [{"index": i, "instruction": f"Say {i}", "output_1": "a" * rng.randint(200, 900),
                    "output_2": "b" * rng.randint(10, 900), "generator_1": "gpt4_1106_preview",
                    "generator_2": "m", "preference": rng.choice([1.0, 1.3, 1.8, 2.0])}
                   for i in range(40)]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(annotations))
    offline = score_annotations(path, "length_controlled_v1", {})
    assert offline["length_controlled_winrate"] is None  # no Hub here, nothing installed
    hub = installed_hub_files(root)
    assert set(hub) == {"df_gamed.csv", "instruction_difficulty.csv"}
    scored = score_annotations(path, "length_controlled_v1", hub)
    assert 0.0 < scored["length_controlled_winrate"] < 100.0
    assert scored["win_rate"] == offline["win_rate"]


def test_a_file_failing_its_checksum_is_refused_and_nothing_half_written(served, tmp_path,
                                                                         monkeypatch, capsys):
    root = tmp_path / "data"
    pinned = pinned_to(served.root)
    monkeypatch.setattr(command, "load_manifests", lambda: pinned)
    served_file = served.root / "gsm8k" / "train.jsonl"
    data = bytearray(served_file.read_bytes())
    data[len(data) // 2] ^= 1  # one bit flipped on the way: same size, other checksum
    served_file.write_bytes(bytes(data))
    assert a2rl_data("fetch", "gsm8k", "--mirror", served.url, f"paths.data={root}") == 1
    assert "sha256" in capsys.readouterr().err
    assert not (root / "gsm8k" / "train.jsonl").exists() and not leftovers(root)
    assert read_record(root, "gsm8k") is None
    # a file the manifest cannot pin yet needs the user's word
    monkeypatch.setattr(command, "load_manifests", load_manifests)
    assert a2rl_data("fetch", "deepsearchqa", "--mirror", served.url,
                     f"paths.data={root}") == 1
    assert "--accept-unpinned" in capsys.readouterr().err
    assert a2rl_data("fetch", "deepsearchqa", "--mirror", served.url, "--accept-unpinned",
                     f"paths.data={root}") == 0
    record = read_record(root, "deepsearchqa")["files"]["deepsearchqa/DSQA-full.csv"]
    assert not record["pinned"] and record["sha256"] == hashlib.sha256(
        (root / "deepsearchqa" / "DSQA-full.csv").read_bytes()).hexdigest()


@pytest.mark.parametrize("ignore_range", [False, True])
def test_an_interrupted_download_resumes_or_starts_over(served, tmp_path, ignore_range):
    root = tmp_path / "data"
    served.cut["webshop/items_shuffle_1000.json"] = 1000
    served.ignore_range = ignore_range
    assert a2rl_data("fetch", "webshop", "--mirror", served.url, f"paths.data={root}") == 0
    got = (root / "webshop" / "items_shuffle_1000.json").read_bytes()
    assert got == (WEBSHOP / "items_shuffle.json").read_bytes()
    asked = [r for p, r in served.requests if p == "webshop/items_shuffle_1000.json"]
    assert asked == [None, "bytes=1000-"]  # resumed where the cut left it (or sent whole)
    assert not leftovers(root)


def test_export_then_from_installs_the_same_files(served, tmp_path):
    first, exported, second = tmp_path / "a", tmp_path / "export", tmp_path / "b"
    assert a2rl_data("fetch", *ALL, "--mirror", served.url, f"paths.data={first}") == 0
    assert a2rl_data("export", str(exported), f"paths.data={first}") == 0
    assert a2rl_data("fetch", "deepsearchqa", "webshop", "--from", str(exported),
                     f"paths.data={second}") == 0
    for rel in ("deepsearchqa/DSQA-full.csv", "webshop/items_human_ins.json"):
        assert (second / rel).read_bytes() == (first / rel).read_bytes()
    # the manifest pins ALFWorld's archive, not an unpacked tree other than the known copy's:
    # installed only when the user accepts it, and recorded as unpinned
    assert a2rl_data("fetch", "alfworld", "--from", str(exported), f"paths.data={second}") == 1
    assert not (second / "alfworld" / "json_2.1.1").exists()
    assert a2rl_data("fetch", "alfworld", "--from", str(exported), "--accept-unpinned",
                     f"paths.data={second}") == 0
    games = sorted(p.relative_to(second) for p in (second / "alfworld").rglob("game.tw-pddl"))
    assert games and games == sorted(p.relative_to(first)
                                     for p in (first / "alfworld").rglob("game.tw-pddl"))
    tree = read_record(second, "alfworld")["files"]["alfworld/json_2.1.1"]
    assert not tree["pinned"] and tree["tree_sha256"] == read_record(
        first, "alfworld")["files"]["alfworld/json_2.1.1"]["tree_sha256"]


def test_a_zip_member_outside_its_folder_is_refused(served, tmp_path, capsys):
    evil = served.root / "alfworld" / "json_2.1.1_tw-pddl.zip"
    with zipfile.ZipFile(evil, "w") as zipped:
        zipped.writestr("json_2.1.1/../../escaped.txt", "x")
    manifests = pinned_to(served.root)
    from a2rl.data.install import Options, fetch

    with pytest.raises(DataError, match="leaves the folder"):
        fetch(manifests.find("alfworld"), tmp_path / "data", Options(mirror=served.url))
    assert not (tmp_path / "escaped.txt").exists() and not leftovers(tmp_path / "data")


def test_missing_data_fails_planning_with_the_fetch_command(tmp_path, monkeypatch):
    from a2rl.config.compose import compose, composing, grid_overrides

    base = grid_overrides("paper", [f"paths.data={tmp_path}"])
    with composing():
        cfgs = [compose([*base, f"task={t}"]) for t in ("alfworld", "deepsearchqa", "webshop")]
    problems = grid_data_problems(cfgs)
    assert len(problems) == 3
    for task in ("alfworld", "deepsearchqa", "webshop"):
        assert any(p.startswith(f"task {task}:") and f"a2rl data fetch {task}`" in p
                   for p in problems), problems
    # the offline grids need no data: a clean clone runs them, whatever A2RL_DATA names (their
    # alpacaeval_local cells read the fixture sample; an explicit paths.data= on the command line
    # would apply to those cells too, as any override does)
    monkeypatch.setenv("A2RL_DATA", str(tmp_path))
    for grid in ("ci", "quick"):
        base = grid_overrides(grid, [])
        tasks = compose(base).grid.tasks
        assert not grid_data_problems([compose([*base, f"task={t}"]) for t in tasks]), grid
    smoke = grid_overrides("smoke", [f"paths.data={tmp_path}"])
    problems = grid_data_problems([compose([*smoke, "task=alpacaeval_local"])])
    assert len(problems) == 1 and "a2rl data fetch alpacaeval`" in problems[0]


@pytest.mark.skipif(FULL_DATA is None, reason="needs $A2RL_DATA (the shared copies)")
def test_the_shared_copies_install_with_from_and_prepare(tmp_path, monkeypatch):
    """The real ALFWorld games and DeepSearchQA questions from $A2RL_DATA, each checked against
    the checksum the manifest keeps for that copy, and each task's preparation on them."""
    from a2rl_tasks.deepsearchqa.dsqa_data import load_dsqa, split_dsqa
    from a2rl_tasks.deepsearchqa.params import DsqaData

    from a2rl.config.types import TaskConfig

    root = tmp_path / "data"
    assert a2rl_data("fetch", "alfworld", "deepsearchqa", "--from", str(FULL_DATA),
                     f"paths.data={root}") == 0
    assert read_record(root, "alfworld")["files"]["alfworld/json_2.1.1"]["pinned"]
    assert len(list((root / "alfworld").rglob("game.tw-pddl"))) == 1474
    rows, source = load_dsqa(DsqaData(), root)
    assert source["path"].endswith("DSQA-full.json") and len(rows) == 900
    train, test, _ = split_dsqa(rows, DsqaData())
    assert (len(train), len(test)) == (100, 200)
    monkeypatch.setenv("BRAVE_API_KEY", "unused-by-prepare")
    dsqa = TaskConfig(id="deepsearchqa", package="deepsearchqa", level="L3",
                      params={"source": "dsqa", "backend": "web", "grader": "judge"})
    _, facts = prepare_in(load_task(dsqa, root), tmp_path / "deepsearchqa")
    assert facts["source"]["rows"] == 900 and facts["excluded_empty_answer"]["count"] == 4
    alfworld = TaskConfig(id="alfworld", package="alfworld", level="L3", params={
        "source": "alfworld", "data_path": "alfworld", "test_games": 2, "train_games": 2,
        "max_steps": 5, "random_seeds": 1})
    _, facts = prepare_in(load_task(alfworld, root), tmp_path / "alfworld")
    assert facts["sizes"]["test"] == 2


def test_a_google_drive_page_instead_of_the_file_is_refused(served, tmp_path, monkeypatch):
    """WebShop's files come from Google Drive share links (its setup.sh's): they are fetched from
    Drive's download URL, and a web page in place of the file (quota, unshared) is an error,
    even for a file the manifest cannot pin yet."""
    from a2rl.data import transfer

    assert transfer.direct_url("https://drive.google.com/uc?id=1EgHdxQ_YxqIQlvvq5iKlCrkEKR6-j0Ib") \
        == ("https://drive.usercontent.google.com/download?id=1EgHdxQ_YxqIQlvvq5iKlCrkEKR6-j0Ib"
            "&export=download&confirm=t")
    monkeypatch.setattr(transfer, "DRIVE_DOWNLOAD", served.url + "/drive/{id}")
    dest = tmp_path / "data" / "items_shuffle_1000.json"
    with pytest.raises(DataError, match="sent a web page"):
        transfer.download("https://drive.google.com/uc?id=1EgHdxQ", dest, None, None)
    assert not dest.exists() and not leftovers(tmp_path / "data")
