"""TextWorld games (offline household games, and ALFWorld's own games, which are TextWorld
games too) behind the ``a2rl.task.envs.TextEnv`` interface.

Self-contained apart from ``textworld`` and ``a2rl.task.envs``: the household task copies this file
(as ``household_env.py``) and ``a2rl/envs.py`` (as ``a2rl_envs.py``) into the agent's data folder,
so an agent can roll out its own model in the train games from inside its sandbox::

    import sys; sys.path.insert(0, "data")
    from household_env import HouseholdEnv, load_games, PROMPT
    from a2rl_envs import play, RandomPolicy
    games = load_games("data/games")          # the train game files
    episodes = play(games, HouseholdEnv, RandomPolicy(0), max_steps=12, fmt=PROMPT)
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

try:
    from a2rl.task import Observation, PromptFormat, Step, TextEnv
except ImportError:  # inside an agent's sandbox: the copy next to this file
    from a2rl_envs import Observation, PromptFormat, Step, TextEnv

# The prompt the grader uses for household games (last 2 steps, observations clipped).
PROMPT = PromptFormat()

_STATUS = re.compile(r"\n\s*>[^\n]*$", re.DOTALL)  # the trailing prompt line with the status bar
_STATUS_BAR = re.compile(r"-= [^=]+ =-\s*\d+/\d+\s*$")
_INTRO = re.compile(r"[^.!?]*TextWorld[^.!?]*[.!?]\s*")
# verbs of commands that never change a TextWorld game's state: left out of the action list
# (they never help to win, and a shorter list keeps prompts short)
IDLE_VERBS = ("look", "inventory", "examine")


def clean_goal(objective: str) -> str:
    """The objective without TextWorld's welcome sentence."""
    return " ".join(_INTRO.sub("", objective or "").split()) or (objective or "").strip()


def clean_observation(feedback: str, objective: str | None = None) -> str:
    """A game's feedback without the banner, the objective (shown separately), the trailing
    ``>`` prompt and the status bar."""
    text = feedback or ""
    if objective and objective in text:
        text = text.split(objective, 1)[1]
    text = _STATUS.sub("", text.rstrip())
    text = _STATUS_BAR.sub("", text.rstrip())
    lines = [ln.rstrip() for ln in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def useful_actions(commands: list[str]) -> list[str]:
    """The admissible commands without the idle ones (``IDLE_VERBS``), sorted."""
    return sorted(c for c in commands if c.split(" ", 1)[0] not in IDLE_VERBS)


def goal_type_of(game_file: str | Path) -> str:
    """The goal type written next to a game (``<game>.meta.json``), else ``unknown``."""
    meta = Path(game_file).with_suffix(".meta.json")
    if meta.exists():
        return json.loads(meta.read_text()).get("goal_type", "unknown")
    return "unknown"


def load_games(folder: str | Path) -> list[str]:
    """The game files (``*.z8`` / ``*.ulx``) in a folder, sorted."""
    folder = Path(folder)
    games = sorted(str(p) for p in folder.iterdir() if p.suffix in (".z8", ".ulx"))
    if not games:
        raise FileNotFoundError(f"no TextWorld game files (*.z8, *.ulx) in {folder}")
    return games


class HouseholdEnv(TextEnv):
    """A TextWorld game file as a ``TextEnv``. Reward is the change of the game's score; the
    episode is done when the game is won or lost. The action list leaves out idle commands
    (look, inventory, examine ...), which the game still accepts. ``info["expert"]`` is the first
    action of the game's winning policy from the current state (TextWorld recomputes it after
    every step, so it labels expert actions off the expert path too); ``info["walkthrough"]``
    the full walkthrough from the start."""

    def __init__(self):
        self.env = None
        self.objective = ""
        self.score = 0.0

    def reset(self, game: str) -> Observation:
        import textworld

        self.close()
        infos = textworld.EnvInfos(admissible_commands=True, won=True, lost=True, score=True,
                                   max_score=True, objective=True, policy_commands=True,
                                   extras=["walkthrough"])
        with warnings.catch_warnings():  # jericho: "not fully supported" (TextWorld's own games)
            warnings.simplefilter("ignore")
            self.env = textworld.start(str(game), request_infos=infos)
        state = self.env.reset()
        self.objective = state["objective"] or ""
        self.score = float(state["score"] or 0)
        obs = self._observation(state)
        obs.info["walkthrough"] = list(state.get("extra.walkthrough") or [])
        obs.info["goal_type"] = goal_type_of(game)
        obs.info["max_score"] = state["max_score"]
        return obs

    def _observation(self, state) -> Observation:
        policy = state["policy_commands"] or []
        return Observation(text=clean_observation(state["feedback"], self.objective),
                           goal=clean_goal(self.objective),
                           admissible=useful_actions(state["admissible_commands"] or []),
                           info={"expert": policy[0] if policy else None})

    def step(self, action: str) -> Step:
        if self.env is None:
            raise RuntimeError("HouseholdEnv.step before reset")
        state, score, done = self.env.step(action)
        reward = float(score) - self.score
        self.score = float(score)
        won = bool(state["won"])
        return Step(self._observation(state), reward, bool(done or won or state["lost"]),
                    {"won": won, "lost": bool(state["lost"]), "score": self.score})

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
