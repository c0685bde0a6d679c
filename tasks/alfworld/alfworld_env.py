"""Real ALFWorld games (``game.tw-pddl``) behind the ``a2rl.task.envs.TextEnv`` interface, played
by ALFWorld's own engine: TextWorld's PDDL backend (``textworld.start`` on a ``.tw-pddl`` file,
which needs ``fast_downward`` from ``textworld[pddl]``) with the wrappers
``alfworld.agents.environment.AlfredTWEnv.init_env`` uses (``AlfredDemangler`` for readable
names such as "mug 1", ``AlfredInfos``), admissible commands from TextWorld's infos.

Self-contained apart from ``textworld``, ``alfworld`` and ``a2rl.task.envs``: the alfworld task
copies this file (as ``alfworld_env.py``) and ``a2rl/envs.py`` (as ``a2rl_envs.py``) into the
agent's data folder, so an agent can roll out its own model in the train games::

    import sys; sys.path.insert(0, "data")
    from alfworld_env import AlfworldEnv, load_games, PROMPT
    from a2rl_envs import play, RandomPolicy
    games = load_games("data/games")          # the train game files
    episodes = play(games, AlfworldEnv, RandomPolicy(0), max_steps=50, fmt=PROMPT)

The expert (``info["expert"]``, used for demonstrations) is the game's own ``walkthrough`` while
the episode follows it; off the walkthrough it is ALFWorld's handcoded expert when the game has
its ``traj_data.json`` (the full download), else the PDDL planner's plan from the current state
(ALFWorld's ``AlfredExpert`` "planner" type: Fast Downward replans). ``AlfworldEnv(expert=False)``
(the grader's) computes no expert at all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

try:
    from a2rl.task import Observation, PromptFormat, Step, TextEnv
except ImportError:  # inside an agent's sandbox: the copy next to this file
    from a2rl_envs import Observation, PromptFormat, Step, TextEnv

# The prompt the grader uses for ALFWorld games: the household games' (one definition).
PROMPT = PromptFormat()

# ALFWorld task folder prefix -> the paper's six task types
TASK_TYPES = {
    "pick_and_place_simple": "pick", "look_at_obj_in_light": "examine",
    "pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool", "pick_two_obj_and_place": "pick_two",
}
_GOAL = re.compile(r"Your task is to:\s*(.*)", re.IGNORECASE)


def task_type(game_file: str | Path) -> str:
    """``pick``, ``clean``, ``heat``, ``cool``, ``examine`` or ``pick_two`` from the game's
    folder name (``<task>-<object>-...-<scene>/<trial>/game.tw-pddl``), else ``unknown``."""
    folder = Path(game_file).parent.parent.name
    for prefix, kind in TASK_TYPES.items():
        if folder.startswith(prefix):
            return kind
    return "unknown"


def load_games(folder: str | Path) -> list[str]:
    """The ALFWorld game files (``**/game.tw-pddl``) under a folder, sorted."""
    folder = Path(folder)
    games = sorted(str(p) for p in folder.rglob("game.tw-pddl"))
    if not games:
        raise FileNotFoundError(f"no ALFWorld game files (**/game.tw-pddl) under {folder}")
    return games


def walkthrough(game_file: str | Path) -> list[str]:
    """The expert action sequence stored in the game file."""
    return list(json.loads(Path(game_file).read_text()).get("walkthrough") or [])


def split_goal(feedback: str) -> tuple[str, str]:
    """ALFWorld's first observation without its welcome banner, and the goal ("Your task is
    to: put a mug in desk." -> "put a mug in desk.")."""
    text = re.sub(r"-= Welcome to TextWorld, ALFRED! =-\s*", "", feedback or "")
    match = _GOAL.search(text)
    if not match:
        return text.strip(), ""
    return text[:match.start()].strip(), match.group(1).strip()


class AlfworldEnv(TextEnv):
    """One ALFWorld game through ALFWorld's engine. Reward 1 on a win, when the episode ends.
    The action list is the game's admissible commands without ``help`` (as ALFWorld's agents
    see them; ``look``, ``inventory`` and ``examine`` stay: ALFWorld's goals need them).
    ``info["walkthrough"]`` (first observation) is the game's expert action sequence and
    ``info["goal_type"]`` its task type; with ``expert=True``, ``info["expert"]`` is the expert's
    next action (see the module's docstring)."""

    def __init__(self, expert: bool = False):
        self.expert = expert
        self.env = None
        self.goal = ""
        self.walkthrough: list[str] = []
        self.taken: list[str] = []
        self.handcoded = None

    def reset(self, game: str) -> Observation:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

        self.close()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"],
                                   facts=self.expert, policy_commands=False)
        self.env = textworld.start(str(game), infos, wrappers=[AlfredDemangler(), AlfredInfos])
        state = self.env.reset()
        self.walkthrough, self.taken = walkthrough(game), []
        self.handcoded = self._handcoded(game, state) if self.expert else None
        text, self.goal = split_goal(state["feedback"])
        obs = self._observation(text, state)
        obs.info.update(goal_type=task_type(game), walkthrough=list(self.walkthrough))
        return obs

    @staticmethod
    def _handcoded(game: str, state):
        """ALFWorld's handcoded expert when the game has its ``traj_data.json``, else None."""
        if not (Path(game).parent / "traj_data.json").exists():
            return None
        from alfworld.agents.expert import HandCodedTWAgent

        agent = HandCodedTWAgent(max_steps=200)
        agent.reset(str(game))
        agent.observe(state["feedback"])
        return agent

    def _expert_action(self, state, admissible: list[str]) -> str | None:
        if not self.expert:
            return None
        handcoded = self._handcoded_next(state, admissible)  # every step: it tracks the game
        k = len(self.taken)
        if self.taken == self.walkthrough[:k] and k < len(self.walkthrough):
            return self.walkthrough[k]
        if self.handcoded is not None:
            return handcoded
        plan = self._replan()
        return plan[0] if plan else None

    def _handcoded_next(self, state, admissible: list[str]) -> str | None:
        """ALFWorld's handcoded expert's next action, as ``AlfredExpert`` asks it after each
        step (None before the first step, without traj_data.json, or when it gives up)."""
        if self.handcoded is None or not self.taken:
            return None
        from alfworld.agents.expert import HandCodedAgentTimeout
        try:
            action = self.handcoded.act(state, 0, state["won"], self.taken[-1])
        except HandCodedAgentTimeout:
            return None
        return action if action in admissible else None

    def _replan(self) -> list[str]:
        """The PDDL planner's plan from the current state (what ``policy_commands`` gives)."""
        inner = self.env
        while not hasattr(inner, "_pddl_state"):
            inner = inner._wrapped_env
        return list(inner._pddl_state.replan(inner._entity_infos) or [])

    def _observation(self, text: str, state) -> Observation:
        admissible = [a for a in (state["admissible_commands"] or []) if a != "help"]
        return Observation(text=text.strip(), goal=self.goal, admissible=admissible,
                           info={"expert": self._expert_action(state, admissible)})

    def step(self, action: str) -> Step:
        if self.env is None:
            raise RuntimeError("AlfworldEnv.step before reset")
        state, score, done = self.env.step(action)
        self.taken.append(action)
        won = bool(state["won"])
        return Step(self._observation(state["feedback"], state), 1.0 if won else 0.0,
                    bool(done or won), {"won": won, "score": float(score)})

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class AlfworldExpertEnv(AlfworldEnv):
    """``AlfworldEnv`` with the expert on (a no-argument factory for ``play``)."""

    def __init__(self):
        super().__init__(expert=True)
