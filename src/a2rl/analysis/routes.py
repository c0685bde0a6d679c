"""Which training methods an agent used, read from its code and transcript (static analysis)
and from its artifacts.

Methods: ``SFT``, ``DPO`` (and its preference-optimisation relatives: ORPO, KTO, CPO, SimPO),
``GRPO``, ``PPO`` (TRL's trainers, or a hand-written loop recognisable as one), ``custom RL``
(RLOO, online DPO, or another hand-written loop that weights log-probabilities by rewards or
advantages), ``prompt-only`` (the weights equal the base model's; only the
chat template, generation config or tokenizer changed) and ``copy`` (the base model submitted
byte for byte). Techniques (``LoRA``, ``QLoRA``) are reported beside the method.

A submission's route comes from its artifact first (a copy is a copy, whatever code lies
around), then from the code recorded at its commit and the transcript up to its time. Python
comments are ignored, so a ``# TODO: try DPO`` does not count.
"""

from __future__ import annotations

import io
import logging
import re
import tokenize
from pathlib import Path
from typing import Any, Iterable

from a2rl.common.records import LedgerEntry

log = logging.getLogger(__name__)

# (method, pattern, what the evidence says); searched in order, every match is evidence
SIGNALS: list[tuple[str, re.Pattern, str]] = [
    ("GRPO", re.compile(r"\bGRPO(?:Trainer|Config)\b"), "TRL GRPOTrainer"),
    ("PPO", re.compile(r"\bPPO(?:v2)?(?:Trainer|Config)\b"), "TRL PPOTrainer"),
    ("DPO", re.compile(r"\b(?:DPO|ORPO|KTO|CPO|SimPO|IPO|BCO)(?:Trainer|Config)\b"),
     "TRL preference trainer"),
    ("custom RL", re.compile(r"\b(?:RLOO|OnlineDPO|XPO|NashMD)(?:Trainer|Config)\b"),
     "TRL online RL trainer"),
    ("SFT", re.compile(r"\bSFT(?:Trainer|Config)\b"), "TRL SFTTrainer"),
    ("SFT", re.compile(r"\bSeq2SeqTrainer\b|\bDataCollatorForLanguageModeling\b|"
                       r"\bDataCollatorForSeq2Seq\b"), "transformers Trainer on text"),
]
TECHNIQUES: list[tuple[str, re.Pattern]] = [
    ("QLoRA", re.compile(r"\bBitsAndBytesConfig\b|load_in_4bit|prepare_model_for_kbit_training")),
    ("LoRA", re.compile(r"\bLoraConfig\b|\bget_peft_model\b|\bPeftModel\b|--lora\b")),
    ("merge", re.compile(r"\bmerge_and_unload\b")),
]
# a hand-written loop: gradients, plus rewards or advantages weighting log-probabilities (RL)
# or a token loss (SFT); group-normalised advantages (or the name) make it GRPO
BACKWARD = re.compile(r"\.backward\(|\baccelerator\.backward\(")
REWARD_LOOP = re.compile(r"\breward|\badvantage", re.IGNORECASE)
GRPO_LOOP = re.compile(r"\bGRPO\b|group[\s\S]{0,200}\.std\(", re.IGNORECASE)
PPO_LOOP = re.compile(r"\bPPO\b|\bclip_?range\b|\bratio\b[\s\S]{0,200}\bclamp\(")
LOGPROB = re.compile(r"log_?probs?|log_softmax|\blogp\b", re.IGNORECASE)
TOKEN_LOSS = re.compile(r"cross_entropy|CrossEntropyLoss|outputs?\.loss|\.loss\b")
TRAINER = re.compile(r"\bTrainer\s*\(")
CODE_SUFFIXES = (".py", ".sh", ".bash", ".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".json",
                 ".txt", ".md")
ORDER = ["SFT", "DPO", "GRPO", "PPO", "custom RL", "prompt-only", "copy", "unknown"]


def strip_comments(text: str, path: str) -> str:
    """Python source without comments (other files as they are)."""
    if not path.endswith(".py"):
        return text
    try:
        kept = [tok for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type != tokenize.COMMENT]
        return tokenize.untokenize(kept)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return text


def detect(sources: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Methods and techniques in ``sources`` ((name, text) pairs), with evidence
    ``{"method", "where", "what"}`` (where: name:line)."""
    methods: dict[str, list[dict[str, str]]] = {}
    techniques: set[str] = set()
    for name, raw in sources:
        if not name.endswith(CODE_SUFFIXES) and not name.startswith("transcript"):
            continue
        text = strip_comments(raw, name)
        for method, pattern, what in SIGNALS:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                methods.setdefault(method, []).append(
                    {"method": method, "where": f"{name}:{line}", "what": what,
                     "match": match.group(0)})
                break
        for technique, pattern in TECHNIQUES:
            if pattern.search(text):
                techniques.add(technique)
        if BACKWARD.search(text) and not methods.keys() & {"GRPO", "PPO", "custom RL"}:
            if REWARD_LOOP.search(text) and LOGPROB.search(text):
                method = ("GRPO" if GRPO_LOOP.search(text) else
                          "PPO" if PPO_LOOP.search(text) else "custom RL")
                methods.setdefault(method, []).append(
                    {"method": method, "where": name, "match": "backward + reward",
                     "what": "hand-written loop weighting log-probabilities by rewards"
                             + (" (group-normalised: GRPO)" if method == "GRPO" else
                                " (clipped ratio: PPO)" if method == "PPO" else "")})
            elif TOKEN_LOSS.search(text) and "SFT" not in methods:
                methods.setdefault("SFT", []).append(
                    {"method": "SFT", "where": name, "match": "backward + token loss",
                     "what": "hand-written training loop on a token loss"})
        if TRAINER.search(text) and not methods and TOKEN_LOSS.search(text):
            methods.setdefault("SFT", []).append(
                {"method": "SFT", "where": name, "match": "Trainer(",
                 "what": "transformers Trainer"})
    if "LoRA" in techniques and "QLoRA" in techniques:
        techniques.discard("LoRA")
    ordered = sorted(methods, key=ORDER.index)
    return {"methods": ordered, "techniques": sorted(techniques),
            "evidence": [e for m in ordered for e in methods[m][:3]]}


def submission_route(artifact: dict[str, Any] | None, code: dict[str, Any]) -> dict[str, Any]:
    """The route of one submission: the artifact's verdict (copy, prompt-only) or the code's
    methods (``unknown`` when neither says anything)."""
    artifact = artifact or {}
    if artifact.get("equals_base"):
        return {"methods": ["copy"], "techniques": [],
                "evidence": [{"method": "copy", "where": "artifact", "match": "hash",
                              "what": "the submitted folder is the base model, byte for byte"}]}
    if artifact.get("weights_equal_base"):
        return {"methods": ["prompt-only"], "techniques": [],
                "evidence": [{"method": "prompt-only", "where": "artifact", "match": "weights",
                              "what": "weights equal the base model's; other files changed"}]}
    # LoRA in the code may be an unused option: believe it when the artifact is an adapter or
    # the code merges adapters into the weights
    techniques = set(code.get("techniques", []))
    if artifact.get("kind") == "adapter":
        techniques.add("QLoRA" if "QLoRA" in techniques else "LoRA")
    elif "merge" not in techniques:
        techniques -= {"LoRA", "QLoRA"}
    techniques.discard("merge")
    if code["methods"]:
        return code | {"techniques": sorted(techniques)}
    return {"methods": ["unknown"], "techniques": sorted(techniques), "evidence": []}


def run_route(per_submission: list[dict[str, Any]]) -> list[str]:
    """The methods of a run, in ORDER, over its valid submissions."""
    found = {m for s in per_submission if s.get("valid") for m in s["methods"]}
    if len(found) > 1:
        found.discard("unknown")
    return sorted(found, key=ORDER.index)


# ------------------------------------------------------------------------------- one run


def _workspace_sources(workspace: Path) -> list[tuple[str, str]]:
    """The code in the workspace as it is now, for runs recorded without code.git."""
    from a2rl.grading.recording import select_files

    if not workspace.is_dir():
        return []
    files, _ = select_files(workspace)
    return [(p.rel, p.data.decode(errors="replace")) for p in files
            if p.rel.endswith(CODE_SUFFIXES) and not p.is_link]


def _code_sources(repo: Path, commit: str | None, cache: dict) -> list[tuple[str, str]]:
    from a2rl.grading import recording

    if not commit:
        return cache.get(None, [])
    if commit not in cache:
        try:
            paths = [p for p in recording.tree_files(repo, commit) if p.endswith(CODE_SUFFIXES)]
            cache[commit] = sorted(recording.read_files(repo, commit, paths).items())
        except recording.RecordingError as err:
            log.warning("cannot read code of commit %s: %s", commit, err)
            cache[commit] = []
    return cache[commit]


def _transcript_sources(records: list[dict[str, Any]],
                        until: str | None) -> list[tuple[str, str]]:
    from a2rl.analysis.integrity import item_texts

    chosen = [c for c in records
              if until is None or not c.get("time") or str(c["time"]) <= until]
    return [(f"transcript:{i + 1}", "\n".join(item_texts(c))) for i, c in enumerate(chosen)]


def route_of(ledger: list[LedgerEntry], lineage: list[dict[str, Any]], repo: Path,
             transcript: list[dict[str, Any]], final_commit: str | None,
             workspace: Path) -> dict[str, Any]:
    """Methods per submission (``per_submission``, in ledger order) and for the run: the code
    at each submission's commit, the transcript up to its time and its artifact. Without
    recorded revisions (runs from before code.git) the workspace's code as left is read."""
    by_hash = {a["artifact_hash"]: a for a in lineage}
    cache: dict[Any, list] = {}
    if final_commit is None:
        cache[None] = _workspace_sources(workspace)
    per_submission = []
    for e in ledger:
        code = detect(_code_sources(repo, e.code_commit, cache)
                      + _transcript_sources(transcript, e.time))
        route = submission_route(by_hash.get(e.artifact_hash), code) if e.valid else code
        per_submission.append({"id": e.submission_id, "valid": e.valid,
                               "code_commit": e.code_commit, **route})
    methods = run_route(per_submission)
    techniques = sorted({t for p in per_submission if p["valid"] for t in p["techniques"]})
    final = detect(_code_sources(repo, final_commit, cache)
                   + _transcript_sources(transcript, None))
    return {"methods": methods, "techniques": techniques, "per_submission": per_submission,
            "final_code": final}
