"""Issue #28, findings 7 and 8: what a submitted folder makes the libraries do while it is
materialised (parsed, an adapter matched and merged, the model loaded) once happened inside the
grader, before any deadline and outside any memory limit: a LoRA adapter whose
``target_modules`` is a regex with catastrophic backtracking froze the grader (the GIL held, the
harness waiting eval_timeout_s + 60 s after the agent), a 26 MB config.json took it to 4.1 GB
(accepted as valid), a 643-byte config with 20,000 layers cost 1.3 GB and 37 s.

Now the folder's configs are capped in size and layers before they are parsed, and the rest runs
in a child process with a deadline and a memory cap (a2rl.grading.loading); the grader gets
only the answer and serves on. Through the real grader on its socket (grader_rig.Rig)."""

from __future__ import annotations

import json
import time

import psutil
import pytest
from grader_rig import Rig

from a2rl.grading.loading import LoadLimits, materialize_limited
from a2rl.models.submission import InvalidSubmission

pytestmark = pytest.mark.attacks

# re.fullmatch of this against a module name such as model.layers.0.self_attn.q_proj runs for
# hours (PEFT matches a string target_modules as a regex against every module's name)
CATASTROPHIC = "(.*)*(.*)*Z"
GIB = 2**30


def rss() -> int:
    return psutil.Process().memory_info().rss


def lora_adapter(folder, target_modules) -> None:
    """A real LoRA adapter of the tiny model, with ``target_modules`` written as given."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(folder.parent / "base")
    get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj"])).save_pretrained(folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    config["target_modules"] = target_modules
    (folder / "adapter_config.json").write_text(json.dumps(config))


def test_an_adapter_regex_that_never_ends_is_stopped_and_the_grader_serves_on(tmp_path,
                                                                              tiny_model):
    with Rig(tmp_path, tiny_model, load_timeout_s=5.0) as rig:
        rig.model("base")
        lora_adapter(rig.ws / "output" / "regex", CATASTROPHIC)
        started = time.monotonic()
        code, body = rig.post("output/regex", timeout=30)
        assert code == 422 and "took longer than 5 s" in body["error"], body
        assert time.monotonic() - started < 20
        rig.assert_serving()
        code, body = rig.post("output/base", timeout=30)
        assert code == 200, body


def test_a_huge_config_is_refused_before_it_is_parsed(tmp_path, tiny_model):
    with Rig(tmp_path, tiny_model) as rig:
        folder = rig.model("big")
        config = json.loads((folder / "config.json").read_text())
        config["padding"] = ["x" * 64] * 400_000  # 26 MB of JSON
        (folder / "config.json").write_text(json.dumps(config))
        before = rss()
        code, body = rig.post("output/big", timeout=30)
        assert code == 422, body
        assert "config.json is 27,200,705 bytes; the limit is 1,048,576" in body["error"]
        assert rss() - before < 200 * 2**20


def test_a_config_with_20000_layers_is_refused_cheaply(tmp_path, tiny_model):
    with Rig(tmp_path, tiny_model) as rig:
        folder = rig.model("deep")
        config = json.loads((folder / "config.json").read_text())
        config["num_hidden_layers"] = 20_000
        config.pop("layer_types", None)  # else transformers refuses the mismatch itself
        (folder / "config.json").write_text(json.dumps(config))
        before, started = rss(), time.monotonic()
        code, body = rig.post("output/deep", timeout=60)
        assert code == 422 and "num_hidden_layers=20000" in body["error"], body
        assert time.monotonic() - started < 10 and rss() - before < 200 * 2**20


def test_loading_past_its_memory_cap_is_the_submissions_failure(tmp_path, tiny_model):
    """The cap is a backstop behind the size checks: what loading allocates past it ends the
    child, not the grader, and the submission is invalid."""
    with pytest.raises(InvalidSubmission, match="memory cap"):
        materialize_limited(tiny_model, tiny_model, tmp_path / "out",
                            LoadLimits(seconds=60, memory_bytes=2**20))
    # and an honest model loads within the cap the grader sets
    assert materialize_limited(tiny_model, tiny_model, tmp_path / "out",
                               LoadLimits(seconds=60, memory_bytes=GIB)) == tiny_model
