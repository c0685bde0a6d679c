"""Gemini CLI (npm @google/gemini-cli), speaking Gemini generateContent."""

from __future__ import annotations

import json

from a2rl.llm.stacks import AgentStack, Launch, LaunchContext, tee_transcript
from a2rl.llm.transcript_schema import Turn, assistant_turn, call, iso, result, tool_turn
from a2rl.llm.wire import GEMINI


class GeminiCli(AgentStack):
    installer, package = "npm", "@google/gemini-cli"
    binary = "node_modules/.bin/gemini"
    home_page = "https://github.com/google-gemini/gemini-cli"
    HOME = "gemini-home"  # GEMINI_CLI_HOME: where the CLI keeps .gemini/ (settings, sessions)

    def launch(self, ctx: LaunchContext) -> Launch:
        argv = [self.binary_path(ctx), "-p", ctx.prompt, "--model", ctx.model, "--yolo",
                "--output-format", "stream-json", "--skip-trust", *ctx.args]
        # with GOOGLE_GEMINI_BASE_URL alone the CLI picks its "gateway" auth, which headless
        # mode refuses; the settings select plain API-key auth (the base URL still holds)
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        env = {"GEMINI_API_KEY": ctx.api_key, "GOOGLE_GEMINI_BASE_URL": ctx.proxy_url,
               "GEMINI_CLI_HOME": f"{ctx.agent_dir}/{self.HOME}",
               "GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_TELEMETRY_ENABLED": "false"}
        return Launch(tee_transcript(argv, self.transcript_path(ctx)), env, GEMINI,
                      files={f"{self.HOME}/.gemini/settings.json": json.dumps(settings)})

    def read_transcript(self, lines: list[dict]) -> list[Turn]:
        """``gemini -p --output-format stream-json``: message (user, assistant deltas), tool_use,
        tool_result (status success | error), result (stats)."""
        turns: list[Turn] = []
        for line in lines:
            kind, time = line.get("type"), iso(line.get("timestamp"))
            if kind == "message" and line.get("role") == "assistant":
                turn = turns[-1] if (turns and turns[-1].role == "assistant"
                                     and not turns[-1].tool_calls) else None
                if turn is None:
                    turn = Turn("assistant", time=time)
                    turns.append(turn)
                turn.text += line.get("content", "")
            elif kind == "message":
                turns.append(Turn(line.get("role", "user"), line.get("content", ""), time=time))
            elif kind == "tool_use":
                assistant_turn(turns, None, time).tool_calls.append(
                    call(line.get("tool_id"), line.get("tool_name", ""), line.get("parameters")))
            elif kind == "tool_result":
                error = line.get("error") or {}
                tool_turn(turns, time).tool_results.append(result(
                    line.get("tool_id"), line.get("output") or error.get("message", ""),
                    error=line.get("status") == "error"))
            elif kind == "error":
                turns.append(Turn("system", str(line.get("message", "")), time=time))
        return turns
