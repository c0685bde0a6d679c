"""OpenHands through its headless CLI (PyPI openhands, on the OpenHands agent SDK),
LiteLLM speaking OpenAI chat completions."""

from __future__ import annotations

import json
from pathlib import Path

from a2rl.llm import transcript_schema as ts
from a2rl.llm.stacks import TRANSCRIPT, AgentStack, Launch, LaunchContext, tee_transcript
from a2rl.llm.transcript_files import take_transcript, transcript_text
from a2rl.llm.wire import OPENAI_CHAT


class OpenHands(AgentStack):
    """The OpenHands agent through its headless CLI. PyPI ``openhands`` is the OpenHands CLI
    (V1, on the OpenHands agent SDK); ``openhands-ai`` 1.x is the web application server and
    no longer has a headless entry point."""

    installer, package = "pip", "openhands"
    binary = "venv/bin/openhands"
    python = "3.12"
    home_page = "https://github.com/OpenHands/OpenHands-CLI"

    def launch(self, ctx: LaunchContext) -> Launch:
        argv = [self.binary_path(ctx), "--headless", "--json", "--always-approve",
                "--override-with-envs", "--exit-without-confirmation", *ctx.args,
                "--task", ctx.prompt]
        env = {"LLM_MODEL": f"openai/{ctx.model}", "LLM_BASE_URL": f"{ctx.proxy_url}/v1",
               "LLM_API_KEY": ctx.api_key, "OPENHANDS_WORK_DIR": ctx.workspace,
               "OPENHANDS_PERSISTENCE_DIR": f"{ctx.home}/.openhands",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
        return Launch(tee_transcript(argv, self.transcript_path(ctx)), env, OPENAI_CHAT)

    def collect_transcript(self, agent_dir: Path, dest: Path) -> bool:
        """The event lines of ``--json`` output: each agent-SDK event is one JSON object per
        line among the CLI's own status messages and summary box (those stay in agent.log)."""
        return take_transcript(agent_dir, TRANSCRIPT, dest, event_lines)

    def transcript_so_far(self, agent_dir: Path) -> str | None:
        return transcript_text(agent_dir, TRANSCRIPT, event_lines)

    def read_transcript(self, lines: list[dict]) -> list[ts.Turn]:
        """OpenHands agent-SDK events: MessageEvent (user or agent ``llm_message``), ActionEvent
        (``thought``, ``action`` with its ``command``, ``tool_call_id``, ``llm_response_id``),
        ObservationEvent (``observation`` with ``content`` and ``exit_code``), AgentErrorEvent."""
        turns: list[ts.Turn] = []
        for event in lines:
            kind, time = event.get("kind"), ts.iso(event.get("timestamp"))
            if kind == "MessageEvent":
                message = event.get("llm_message") or {}
                role = "assistant" if event.get("source") == "agent" else "user"
                turns.append(ts.Turn(role, ts.text_of(message.get("content")), time=time))
            elif kind == "ActionEvent":
                turn = ts.assistant_turn(turns, event.get("llm_response_id"), time)
                ts.add_text(turn, ts.text_of(event.get("thought")))
                action = dict(event.get("action") or {})
                action.pop("kind", None)
                name = event.get("tool_name") or ""
                if name == "finish":
                    ts.add_text(turn, str(action.get("message", "")))
                turn.tool_calls.append(ts.call(event.get("tool_call_id"), name, action))
            elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
                observation = event.get("observation") or {}
                output = ts.text_of(observation.get("content")) or observation.get("output") or \
                    event.get("error", "")
                exit_code = observation.get("exit_code")
                if exit_code is None:
                    exit_code = (observation.get("metadata") or {}).get("exit_code")
                ts.tool_turn(turns, time).tool_results.append(ts.result(
                    event.get("tool_call_id"), output, exit_code if exit_code != -1 else None,
                    error=kind != "ObservationEvent" or bool(observation.get("is_error"))))
            elif kind == "ConversationErrorEvent":
                turns.append(ts.Turn("system", str(event.get("detail", "")), time=time))
        return turns


def event_lines(raw: bytes) -> str:
    """The lines of a CLI's output that are JSON objects, without its plain messages."""
    text = raw.decode("utf-8", errors="replace")
    return "".join(line for line in text.splitlines(keepends=True)
                   if line.startswith("{") and is_json(line))


def is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
