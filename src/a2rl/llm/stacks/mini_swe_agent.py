"""mini-SWE-agent (PyPI mini-swe-agent): one bash tool, LiteLLM speaking OpenAI chat
completions; its trajectory file is the transcript."""

from __future__ import annotations

import json
from pathlib import Path

from a2rl.llm.stacks import AgentStack, Launch, LaunchContext
from a2rl.llm.transcript_files import take_transcript, transcript_text
from a2rl.llm.transcript_schema import Turn, call, iso, result, text_of, tool_turn
from a2rl.llm.wire import OPENAI_CHAT


class MiniSweAgent(AgentStack):
    installer, package = "pip", "mini-swe-agent"
    binary = "venv/bin/mini"
    home_page = "https://github.com/SWE-agent/mini-swe-agent"
    TRAJECTORY = "trajectory.json"

    def launch(self, ctx: LaunchContext) -> Launch:
        timeout = max(1, int(ctx.time_limit_s))
        argv = [self.binary_path(ctx), "--yolo", "--exit-immediately", "--model",
                f"openai/{ctx.model}", "--cost-limit", "0",
                "--output", f"{ctx.agent_dir}/{self.TRAJECTORY}",
                "-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={ctx.proxy_url}/v1",
                "-c", "model.cost_tracking=ignore_errors",
                "-c", f"environment.timeout={timeout}", "-c", f"environment.cwd={ctx.workspace}",
                *ctx.args, "--task", ctx.prompt]
        env = {"OPENAI_API_KEY": ctx.api_key, "MSWEA_CONFIGURED": "true",
               "MSWEA_COST_TRACKING": "ignore_errors", "MSWEA_SILENT_STARTUP": "1",
               "MSWEA_GLOBAL_CONFIG_DIR": f"{ctx.home}/.config/mini-swe-agent",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
        return Launch(argv, env, OPENAI_CHAT)

    def collect_transcript(self, agent_dir: Path, dest: Path) -> bool:
        """One JSON line per message of mini's trajectory (its ``info`` as a last line)."""
        return take_transcript(agent_dir, self.TRAJECTORY, dest, trajectory_lines)

    def transcript_so_far(self, agent_dir: Path) -> str | None:
        return transcript_text(agent_dir, self.TRAJECTORY, trajectory_lines)

    def read_transcript(self, lines: list[dict]) -> list[Turn]:
        """mini-swe-agent's trajectory messages (a line each): assistant messages with tool_calls
        (or, in text mode, ``extra.actions``) and the raw response's usage; tool messages with
        ``extra.returncode`` and ``extra.raw_output``; an ``exit`` and an ``info`` line last."""
        turns: list[Turn] = []
        for line in lines:
            role, extra = line.get("role"), line.get("extra") or {}
            if role == "assistant":
                response = extra.get("response") or {}
                usage = response.get("usage") or {}
                turn = Turn("assistant", text_of(line.get("content")),
                            time=iso(response.get("created") or extra.get("timestamp")),
                            input_tokens=usage.get("prompt_tokens"),
                            output_tokens=usage.get("completion_tokens"),
                            response_id=response.get("id"))
                for tool in line.get("tool_calls") or []:
                    function = tool.get("function") or {}
                    turn.tool_calls.append(call(tool.get("id"), function.get("name", ""),
                                                function.get("arguments")))
                if not turn.tool_calls:
                    turn.tool_calls = [call(a.get("tool_call_id"), "bash",
                                            {"command": a.get("command", "")})
                                       for a in extra.get("actions") or []]
                turns.append(turn)
            elif role in ("tool", "user") and "returncode" in extra:
                output = extra.get("raw_output", "")
                if extra.get("exception_info"):
                    output = f"{output}\n{extra['exception_info']}".strip()
                tool_turn(turns, iso(extra.get("timestamp"))).tool_results.append(result(
                    line.get("tool_call_id"), output, extra.get("returncode")))
            elif role in ("system", "user"):
                turns.append(Turn(role, text_of(line.get("content"))))
            elif role == "exit":
                turns.append(Turn("system", f"exit: {extra.get('exit_status', '')}"))
        return turns


def trajectory_lines(raw: bytes) -> str:
    """mini-swe-agent's trajectory file as JSON lines: each message, then its ``info``."""
    trajectory = json.loads(raw)
    if not isinstance(trajectory, dict):
        raise ValueError("the trajectory is not a JSON object")
    lines = [json.dumps(message) for message in trajectory.get("messages", [])]
    if "info" in trajectory:
        lines.append(json.dumps({"role": "info", "info": trajectory["info"]}))
    return "".join(line + "\n" for line in lines)
