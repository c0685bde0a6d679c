"""Every real config under conf/ composes into a checked RunConfig; bad values fail naming their
key; grids expand into the right cells."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from a2rl.config.checks import help_of
from a2rl.config.compose import (
    cell_overrides,
    compose,
    composing,
    conf_dir,
    grid_cells,
    grid_overrides,
    plugin_conf_dirs,
    task_overrides,
)
from a2rl.config.types import DEFAULT_GRID, ConfigError, RunConfig
from checkout import REPO

CONF = conf_dir()
# conf/ and each installed plugin's conf/ (the tasks' conf/task/<id>.yaml live in their packages)
CONF_DIRS = [CONF, *plugin_conf_dirs()]
# groups chosen in conf/config.yaml's defaults list ("optional local" among them)
DEFAULT_GROUPS = {
    next(iter(entry)).split()[-1]
    for entry in yaml.safe_load((CONF / "config.yaml").read_text())["defaults"]
    if isinstance(entry, dict)
}
OPTIONS = sorted({(group.name, option.stem)
                  for conf in CONF_DIRS for group in conf.iterdir() if group.is_dir()
                  for option in group.glob("*.yaml")})
# option files whose own name must equal the name they give the thing (paths depend on it)
NAMED_BY_FILE = {"task": "id", "agent": "name", "driver": "name", "budget": "name"}
CELL_AXES = ("task", "agent", "driver")


def option_override(group: str, option: str) -> str:
    return f"{group}={option}" if group in DEFAULT_GROUPS else f"+{group}={option}"


def test_conf_has_every_group():
    for group in ("task", "agent", "driver", "budget", "grid", "paths"):
        assert any(g == group for g, _ in OPTIONS), f"conf/{group}/ is empty"


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}/{o}" for g, o in OPTIONS])
def test_every_option_composes(group, option):
    cfg = compose([option_override(group, option)])
    assert isinstance(cfg, RunConfig)
    if group in NAMED_BY_FILE:
        assert getattr(getattr(cfg, group), NAMED_BY_FILE[group]) == option
    if group == "grid":
        assert cfg.grid.name == option


@pytest.mark.parametrize("grid", sorted(p.stem for p in (CONF / "grid").glob("*.yaml")))
def test_every_cell_of_every_grid_composes(grid):
    base = grid_overrides(grid)
    cfg = compose(base)
    cells = grid_cells(cfg)
    assert cells
    for task in cfg.grid.tasks:
        assert compose(task_overrides(task, base)).task.id == task
    for cell in cells[:4] + cells[-2:]:
        cell_cfg = compose(cell_overrides(cell, base))
        assert (cell_cfg.task.id, cell_cfg.agent.name, cell_cfg.driver.name, cell_cfg.seed) == (
            cell["task"], cell["agent"], cell["driver"], cell["seed"])
        assert cell_cfg.grid == cfg.grid


def test_default_config():
    cfg = compose()
    assert (cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.budget.name, cfg.grid.name) == (
        "gsm8k_arith", "noop", "none", "quick", "quick")
    assert cfg.grid.name == DEFAULT_GRID  # what Snakemake and a2rl doctor run by default
    assert (cfg.seed, cfg.sandbox) == (0, "bwrap")
    assert cfg.task.params["source"]["kind"] == "reasoning_gym"
    assert cfg.agent.command == ["{python}", "{agents}/noop.py"]
    assert cfg.budget.time_limit_s == 210


def test_the_default_grid_plays_every_offline_task_smaller_than_smoke():
    """`snakemake --cores all` runs the quick grid: the smoke grid's six offline tasks with noop
    and sft, each on a smaller sealed split, and nothing in it needs the network or ../shared."""
    quick, smoke = compose(), compose(["grid=smoke"])
    cells = {(c["task"], c["agent"]) for c in grid_cells(quick)}
    assert cells == {(task, agent) for task in smoke.grid.tasks for agent in ("noop", "sft")}
    sizes = {"gsm8k_arith": "test_size", "humaneval": "test_size",
             "alpacaeval_local": "test_size",
             "household": "test_games", "webshop": "test_goals",
             "deepsearchqa_world": "test_questions"}
    for task, key in sizes.items():
        small, large = compose([f"task={task}", "agent=sft"]), compose(
            ["grid=smoke", f"task={task}", "agent=sft"])
        assert small.task.params[key] < large.task.params[key], task
        assert small.budget.time_limit_s < large.budget.time_limit_s, task
        assert small.agent.settings["sft"]["max_rounds"] == 1, task
    alpaca = compose(["task=alpacaeval_local"]).task.params
    assert (alpaca["eval_source"], alpaca["judge"]["kind"]) == ("file", "local")
    assert compose(["task=webshop"]).task.params["source"] == "procedural"
    world = compose(["task=deepsearchqa_world"]).task.params
    assert (world["source"], world["backend"], world["grader"]) == ("world", "local", "match")


def test_ci_grid_uses_the_tiny_model_and_small_splits():
    cfg = compose(["grid=ci"])
    assert (cfg.task.model.name, cfg.task.model.source) == ("tiny-qwen2", "tiny")
    assert cfg.budget.name == "ci" and cfg.budget.time_limit_s == 120
    assert cfg.task.params["test_size"] < 50 and cfg.task.params["train_size"] < 200
    # an explicit override still wins over the grid's choice
    assert compose(["grid=ci", "budget=smoke"]).budget.name == "smoke"


def test_unimplemented_tasks_compose():
    cfg = compose(["task=webshop", "task.implemented=false"])
    assert not cfg.task.implemented and cfg.task.level == "L3"


def test_webshop_params_are_the_tasks_own():
    from a2rl_tasks.webshop.params import WebShopParams

    task_file = yaml.safe_load((REPO / "tasks" / "webshop" / "conf" / "task" / "webshop.yaml")
                               .read_text())
    own = WebShopParams.from_dict(task_file["params"])  # the task's own sizes
    assert (own.source, own.test_goals, own.max_steps, own.results_per_page) == \
        ("procedural", 50, 15, 10)
    # the smoke grid's shop is smaller, so that one evaluation fits the default grid
    smoke = WebShopParams.from_dict(compose(["grid=smoke", "task=webshop"]).task.params)
    assert (smoke.source, smoke.test_goals, smoke.max_steps, smoke.results_per_page) == \
        ("procedural", 20, 10, 5)
    paper = WebShopParams.from_dict(compose(["grid=paper", "task=webshop"]).task.params)
    assert paper.source == "webshop" and paper.test_goals == 500
    assert paper.product_file.endswith("webshop/items_shuffle_1000.json")


def test_deepsearchqa_configs_build_their_params():
    """The paper's cell uses the real questions, the web and the judge; the smoke grid's the
    offline world, BM25 and the matcher."""
    from a2rl_tasks.deepsearchqa.params import DeepSearchParams

    paper = compose(["grid=paper", "task=deepsearchqa"]).task
    p = DeepSearchParams.from_dict(paper.params)
    assert paper.implemented and (p.source, p.backend, p.grader) == ("dsqa", "web", "judge")
    assert (p.max_steps, p.dsqa.shuffle_seed, p.dsqa.train_size, p.dsqa.test_size) == (
        6, 42, 100, 200)
    world = compose(["grid=smoke", "task=deepsearchqa_world"]).task
    w = DeepSearchParams.from_dict(world.params)
    assert world.implemented and (w.source, w.backend, w.grader) == ("world", "local", "match")


def test_gsm8k_params_are_the_tasks_own():
    import a2rl_tasks.gsm8k.params as params_module

    for task in ("gsm8k", "gsm8k_arith"):
        params_module.GSM8KParams.from_dict(compose([f"task={task}"]).task.params)
    params_module.GSM8KParams.from_dict(compose(["grid=ci"]).task.params)


@pytest.mark.parametrize(("override", "key"), [
    ("budget.time_limit_s=-1", "budget.time_limit_s"),
    ("budget.max_submissions=0", "budget.max_submissions"),
    ("budget.memory_gb=0", "budget.memory_gb"),
    ("budget.max_processes=4", "budget.max_processes"),
    ("budget.tmpfs_gb=-1", "budget.tmpfs_gb"),
    ("budget.max_agent_log_mb=0", "budget.max_agent_log_mb"),
    ("budget.max_egress_log_lines=0", "budget.max_egress_log_lines"),
    ("budget.disk_gb=0", "budget.disk_gb"),
    ("budget.disk_files=0", "budget.disk_files"),
    ("budget.grader_restarts=-1", "budget.grader_restarts"),
    ("task.feedback=foo", "task.feedback"),
    ("task.level=L9", "task.level"),
    ("task.public_sources=[github]", "task.public_sources"),
    ("task.model.source=ftp", "model.source"),
    ("sandbox=docker", "sandbox"),
    ("seed=abc", "seed"),
    ("+budget.unknown_knob=1", "unknown_knob"),
    ("+surprise=1", "surprise"),
    ("task=no_such_task", "no_such_task"),
])
def test_bad_values_fail_naming_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        compose([override])
    assert key in str(err.value)


def test_grid_overrides_refuse_cell_axes():
    assert grid_overrides("ci", ["task.params.test_size=8"]) == ["grid=ci",
                                                                 "task.params.test_size=8"]
    for bad in ("task=gsm8k", "seed=3", "+agent=sft", "grid=paper"):
        with pytest.raises(ConfigError, match="grid decides"):
            grid_overrides("ci", [bad])


def test_reference_agents_get_driver_none_only():
    cfg = compose(["grid=smoke", "grid.tasks=[gsm8k_arith]", "grid.agents=[noop,sft,llm,llm]",
                   "grid.drivers=[none,gpt]", "grid.seeds=[0,1]"])
    cells = grid_cells(cfg)
    pairs = {(c["agent"], c["driver"]) for c in cells}
    assert pairs == {("noop", "none"), ("sft", "none"), ("llm", "none"), ("llm", "gpt")}
    assert len(cells) == len(pairs) * 2  # two seeds, no duplicates
    assert cells[0] == {"task": "gsm8k_arith", "agent": "noop", "driver": "none", "seed": 0}


def test_agent_tasks_limit_an_agent_to_some_tasks():
    cfg = compose(["grid=smoke"])
    pairs = [(c["task"], c["agent"]) for c in grid_cells(cfg)]
    assert pairs == [("gsm8k_arith", "noop"), ("gsm8k_arith", "sft"), ("humaneval", "noop"),
                     ("humaneval", "sft"), ("alpacaeval_local", "noop"),
                     ("alpacaeval_local", "sft"), ("alpacaeval_local", "dpo"),
                     ("household", "noop"), ("household", "sft"),
                     ("household", "sft_grpo"), ("webshop", "noop"), ("webshop", "sft"),
                     ("webshop", "sft_grpo"), ("deepsearchqa_world", "noop"),
                     ("deepsearchqa_world", "sft")]
    # an override of the agents keeps the restriction for those still in the grid
    cfg = compose(["grid=smoke", "grid.agents=[sft]"])
    assert [c["task"] for c in grid_cells(cfg)] == [
        "gsm8k_arith", "humaneval", "alpacaeval_local", "household", "webshop",
        "deepsearchqa_world"]


def test_grid_task_files_size_a_task_for_one_grid_only():
    ci = compose(["grid=ci", "task=household"])
    smoke = compose(["grid=smoke", "task=household"])
    assert (ci.task.params["test_games"], smoke.task.params["test_games"]) == (4, 50)
    assert compose(["grid=ci", "task=gsm8k_arith"]).task.params["test_size"] == 16
    assert compose(["grid=smoke", "task=gsm8k_arith"]).task.params["test_size"] == 200
    assert (smoke.budget.time_limit_s, smoke.budget.count_eval_time) == (1500, False)
    assert compose(["grid=smoke", "task=humaneval"]).budget.time_limit_s == 600
    assert compose(["grid=smoke", "task=gsm8k_arith"]).budget.time_limit_s == 480
    alpaca = compose(["grid=smoke", "task=alpacaeval_local"])
    assert (alpaca.task.params["judge"]["kind"], alpaca.task.params["test_size"]) == ("local", 50)
    assert compose(["grid=quick", "task=alpacaeval_local"]).task.params["test_size"] == 20
    assert compose(["grid=paper", "task=alpacaeval"]).task.params["judge"]["kind"] == "api"
    world = compose(["grid=smoke", "task=deepsearchqa_world", "agent=sft"])
    assert world.budget.time_limit_s == 1500 and world.agent.settings["sft"]["max_len"] == 768


def test_the_alfworld_cpu_grid_plays_a_subset_of_the_real_sealed_games_at_50_steps():
    """Real ALFWorld on a CPU: the real game files, the paper's test split and step limit, 12 of
    its games, on the task's own small model (the paper grid's is the 7B)."""
    cfg = compose(["grid=alfworld_cpu", "task=alfworld", "agent=sft"])
    assert [(c["task"], c["agent"]) for c in grid_cells(cfg)] == [("alfworld", "noop"),
                                                                   ("alfworld", "sft")]
    params = cfg.task.params
    assert (params["source"], params["split"], params["max_steps"], params["test_games"]) == (
        "alfworld", "eval_out_of_distribution", 50, 12)
    assert cfg.task.model.name == "smollm2-135m-instruct"
    assert compose(["grid=paper", "task=alfworld"]).task.model.name != cfg.task.model.name
    assert (cfg.budget.time_limit_s, cfg.agent.settings["sft"]["steps"]) == (1500, 40)


def test_paper_grid_cells():
    cfg = compose(["grid=paper"])
    cells = grid_cells(cfg)
    # 6 tasks x (6 LLM agents x 6 drivers + 2 reference agents with driver none) x 3 seeds,
    # sft_grpo on ALFWorld only, dpo on the three tasks whose training rows have targets
    assert len(cells) == 6 * (6 * 6 + 2) * 3 + 3 + 3 * 3
    assert {c["task"] for c in cells if c["agent"] == "sft_grpo"} == {"alfworld"}
    assert {c["task"] for c in cells if c["agent"] == "dpo"} == {"gsm8k", "humaneval",
                                                                  "alpacaeval"}
    llm_cells = [c for c in cells if c["driver"] != "none"]
    assert {c["agent"] for c in llm_cells} == {"claude_code", "codex", "gemini_cli", "opencode",
                                               "openhands", "mini_swe_agent"}
    assert {c["driver"] for c in llm_cells} == {"claude_opus_4_6", "claude_sonnet_4_5",
                                                "gpt_5_4", "gpt_5_2", "gpt_4o",
                                                "gemini_2_5_flash"}
    assert {(c["agent"], c["driver"]) for c in cells if c["driver"] == "none"} == {
        ("noop", "none"), ("sft", "none"), ("dpo", "none"), ("sft_grpo", "none")}
    assert {c["task"] for c in cells} == {"gsm8k", "humaneval", "alpacaeval", "alfworld",
                                          "webshop", "deepsearchqa"}
    assert {c["seed"] for c in cells} == {0, 1, 2}
    assert cfg.budget.name == "paper"


def test_cell_overrides_order():
    cell = {"task": "gsm8k", "agent": "sft", "driver": "none", "seed": 2}
    assert cell_overrides(cell, ["grid=paper"]) == [
        "grid=paper", "task=gsm8k", "agent=sft", "driver=none", "seed=2"]


def test_conf_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("A2RL_CONF", str(tmp_path))
    with pytest.raises(ConfigError, match="A2RL_CONF"):
        conf_dir()
    monkeypatch.setenv("A2RL_CONF", str(CONF))
    assert conf_dir() == Path(CONF).resolve()


def test_every_config_field_documents_itself():
    """The dataclasses are the config's one definition: each field carries its help text."""
    assert [key for key, text in help_of(RunConfig).items() if not text.strip()] == []
    assert not (CONF.parent / "workflow" / "schemas").exists()  # no second, hand-kept copy


@pytest.mark.parametrize("name", ["gsm8k.params.GSM8KParams", "humaneval.params.HumanEvalParams",
                                  "humaneval.params.ExtraSource", "alfworld.params.AlfworldParams"])
def test_every_task_param_documents_itself(name):
    import importlib

    module, cls = name.rsplit(".", 1)
    params = getattr(importlib.import_module(f"a2rl_tasks.{module}"), cls)
    assert [key for key, text in help_of(params).items() if not text.strip()] == []


@pytest.mark.parametrize(("name", "key", "values"), [
    ("gsm8k.params.GSM8KParams", "protocol", "gsm8k.params.PROTOCOLS"),
    ("gsm8k.params.SourceParams", "kind", "gsm8k.params.SOURCE_KINDS"),
    ("humaneval.params.ExtraSource", "kind", "humaneval.params.EXTRA_KINDS"),
    ("humaneval.params.HumanEvalParams", "sandbox", "humaneval.params.ISOLATIONS"),
    ("alfworld.params.AlfworldParams", "goal_types", "alfworld.params.KNOWN_GOAL_TYPES"),
])
def test_a_help_text_naming_a_choice_list_names_each_choice(name, key, values):
    """These texts spell out a constant's values (a docstring is a literal, not an f-string):
    a value added to the constant must reach the text."""
    import importlib

    def attr(dotted):
        module, attr_name = dotted.rsplit(".", 1)
        return getattr(importlib.import_module(f"a2rl_tasks.{module}"), attr_name)

    text = help_of(attr(name))[key]
    assert [v for v in attr(values) if not re.search(rf"\b{re.escape(v)}\b", text)] == [], text


@pytest.mark.parametrize(("override", "message"), [
    ("task.id=a/b", "task.id='a/b'"),
    ("task.package=a.b", "task.package='a.b'"),
    ("task.model.name=../x", "model.name='../x'"),
    ("agent.name=a b", "agent.name='a b'"),
    ("seed=-1", "seed=-1"),
    ("grid.seeds=[0,-2]", "grid.seeds=[0, -2]"),
    ("task.inference.torch_threads=-1", "inference.torch_threads=-1"),
    ("agent.torch_threads=-3", "agent.torch_threads=-3"),
])
def test_values_the_old_schema_refused_fail_naming_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        compose([override])
    assert message in str(err.value)


def test_compositions_in_a_composing_block_share_one_hydra_and_agree():
    """Inside composing() Hydra is initialised once, at the first composition, and left as it
    was after the block; what it composes equals a composition on its own, and a bad option
    still fails with ConfigError."""
    from hydra.core.global_hydra import GlobalHydra

    alone = [compose(["grid=ci", f"agent={agent}"]) for agent in ("noop", "sft")]
    with composing():
        assert not GlobalHydra.instance().is_initialized()  # nothing composed yet
        shared = [compose(["grid=ci", f"agent={agent}"]) for agent in ("noop", "sft")]
        assert GlobalHydra.instance().is_initialized()
        with pytest.raises(ConfigError, match="no_such_agent"):
            compose(["grid=ci", "agent=no_such_agent"])
    assert not GlobalHydra.instance().is_initialized()
    assert shared == alone


HUB_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def test_every_hub_model_and_dataset_in_conf_names_a_commit():
    """What conf/ loads from the Hub is pinned to a commit, so that one config gets the same
    weights and items in six months (the loading code passes it on: tests/models, tasks)."""
    from a2rl_tasks.alpacaeval.params import AlpacaEvalParams
    from a2rl_tasks.gsm8k.params import GSM8KParams

    models = [yaml.safe_load(path.read_text()) for path in (conf_dir() / "model").glob("*.yaml")]
    assert [m for m in models if m["source"] == "hf"]
    for model in models:
        assert model["source"] != "hf" or HUB_COMMIT.match(model["revision"]), model
    source = GSM8KParams.from_dict(compose(["task=gsm8k"]).task.params).source
    assert source.kind == "hf" and HUB_COMMIT.match(source.hf_revision)
    for task in ("alpacaeval", "alpacaeval_gpt52"):
        params = AlpacaEvalParams.from_dict(compose([f"task={task}"]).task.params)
        assert HUB_COMMIT.match(params.hf_revision) and HUB_COMMIT.match(params.alpaca_revision)


@pytest.mark.parametrize("grid", ["ci", "smoke", DEFAULT_GRID])
def test_a_grid_without_a_label_is_labelled_by_its_own_name(grid):
    """Not by the default grid's: `a2rl run grid=ci` once filed its summary under "quick", since
    the structured defaults had already run GridConfig's __post_init__ on the default grid."""
    assert compose([f"grid={grid}"]).grid.label == grid
    assert compose([f"grid={grid}", "++grid.label=x-1"]).grid.label == "x-1"
