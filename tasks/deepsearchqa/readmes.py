"""The README.md that prepare writes into the agent's data folder, for each source."""

from __future__ import annotations

from a2rl.task.envs import PromptFormat

from .params import DeepSearchParams


def world_readme(p: DeepSearchParams, fmt: PromptFormat, n_questions: int,
                 n_pairs: int) -> str:
    example = fmt.user_prompt("<the question>", [("<previous action>", "<its result>")],
                              "<what the last action showed>", [])
    return (
        "# Training data: search-and-answer questions over a fictional world\n\n"
        f"- `train_questions.jsonl`: {n_questions} questions (`question`, `answers`, "
        "`answer_type`, `template`, `plan`: the pages an expert reads).\n"
        "- `search/`: the world's pages (`corpus.jsonl`) and their BM25 index; the grader "
        "searches the same corpus. Test questions ask about other people, organisations "
        "and products of the same world.\n"
        "- `trajectories.jsonl`: the expert's episode for each train question.\n"
        f"- `train.jsonl`: {n_pairs} step-level pairs `prompt` (the grader's user turn in "
        "that state) -> `completion` (the expert's action).\n"
        "- `dsqa_env.py`, `dsqa_scoring.py`, `a2rl_envs.py`: the environment, the answer "
        "matcher and the policy runner, to roll out your own model (see below).\n\n"
        f"The grader plays each test question for at most {p.max_steps} actions. Every "
        "turn it sends one user turn (the model's chat template, no system turn) and "
        f"greedily decodes at most {p.max_new_tokens} tokens; the reply's first line is "
        "the action. The user turn is:\n\n"
        f"```\n{example}\n```\n\n"
        "An answer scores 1 when it names every expected item and nothing else "
        "(case, accents and punctuation do not matter; list items separated by commas).\n\n"
        "## Rolling out a model in the train questions\n\n"
        "```python\nimport sys; sys.path.insert(0, 'data')\n"
        "from dsqa_env import LocalBackend, SearchEnv, EnvSettings, load_questions, PROMPT\n"
        "from a2rl_envs import play, ExpertPolicy, GeneratorPolicy, success_rate\n"
        "questions = load_questions('data/train_questions.jsonl')\n"
        "backend = LocalBackend.load('data/search')\n"
        f"settings = EnvSettings(max_steps={p.max_steps})\n"
        "episodes = play(list(questions), lambda: SearchEnv(questions, backend, settings), "
        f"ExpertPolicy(), max_steps={p.max_steps}, fmt=PROMPT, keep_prompts=True)\n"
        "print(success_rate(episodes))\n```\n\n"
        "`GeneratorPolicy(gen)` plays with a model: `gen` has `.tokenizer` and "
        "`.generate(prompts, max_new_tokens)`.\n")


def dsqa_readme(p: DeepSearchParams, n_questions: int) -> str:
    return (
        "# Training data: DeepSearchQA questions\n\n"
        f"- `train_questions.jsonl`: {n_questions} real DeepSearchQA questions with their "
        "answers (`answer`, `answer_type`: Single Answer or Set Answer, `category`).\n"
        "- `train.jsonl`: the first prompt of each question -> `answer[<gold answer>]` "
        "(closed-book pairs: no expert plays the real web).\n"
        "- `dsqa_env.py`, `dsqa_web.py`, `dsqa_scoring.py`, `a2rl_envs.py`: the "
        "environment and its web backend (needs the network and a search API key).\n\n"
        f"The grader plays each test question for at most {p.max_steps} actions with the "
        f"web backend ({p.web.provider}), greedy, {p.max_new_tokens} tokens a turn, and "
        "an LLM judge decides, per expected item, whether the answer contains it.\n")
