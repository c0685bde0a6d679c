"""OpenCode (npm opencode-ai), with a provider pointing at the proxy (Anthropic, Gemini
or OpenAI-compatible by driver)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from a2rl.llm.stacks import AgentStack, Launch, LaunchContext, tee_transcript
from a2rl.llm.transcript_schema import Turn, add_text, assistant_turn, call, iso, result
from a2rl.llm.wire import ANTHROPIC, GEMINI, OPENAI_CHAT


class OpenCode(AgentStack):
    installer, package = "npm", "opencode-ai"
    binary = "node_modules/.bin/opencode"
    home_page = "https://github.com/sst/opencode"
    # provider -> (AI SDK package bundled in opencode, base URL suffix, protocol)
    SDKS: ClassVar[dict[str, tuple[str, str, str]]] = {
        "anthropic": ("@ai-sdk/anthropic", "/v1", ANTHROPIC),
        "gemini": ("@ai-sdk/google", "/v1beta", GEMINI)}
    DEFAULT_SDK = ("@ai-sdk/openai-compatible", "/v1", OPENAI_CHAT)

    def config(self, ctx: LaunchContext) -> tuple[dict[str, Any], str]:
        sdk, suffix, protocol = self.SDKS.get(ctx.provider, self.DEFAULT_SDK)
        model = f"a2rl/{ctx.model}"
        return {"$schema": "https://opencode.ai/config.json", "model": model,
                "small_model": model, "autoupdate": False, "share": "disabled",
                "provider": {"a2rl": {
                    "npm": sdk, "name": "a2rl proxy",
                    "options": {"baseURL": ctx.proxy_url + suffix, "apiKey": ctx.api_key},
                    "models": {ctx.model: {"name": ctx.model, "tool_call": True}}}}}, protocol

    def launch(self, ctx: LaunchContext) -> Launch:
        config, protocol = self.config(ctx)
        argv = [self.binary_path(ctx), "run", "--format", "json", "--auto",
                "--model", config["model"], *ctx.args, ctx.prompt]
        env = {"OPENCODE_CONFIG_CONTENT": json.dumps(config),
               "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
               "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
               "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
        return Launch(tee_transcript(argv, self.transcript_path(ctx)), env, protocol)

    def read_transcript(self, lines: list[dict]) -> list[Turn]:
        """``opencode run --format json``: per step a step_start, text and tool_use parts (the
        tool's state holds input, output and metadata.exit), and a step_finish with its tokens."""
        turns: list[Turn] = []
        for line in lines:
            kind, time, part = line.get("type"), iso(line.get("timestamp")), line.get("part") or {}
            message_id = part.get("messageID")
            if kind == "text":
                add_text(assistant_turn(turns, message_id, time), part.get("text", ""))
            elif kind == "tool_use":
                state = part.get("state") or {}
                turn = assistant_turn(turns, message_id, time)
                turn.tool_calls.append(call(part.get("callID"), part.get("tool", ""),
                                            state.get("input")))
                meta = state.get("metadata") or {}
                turns.append(Turn("tool", time=time, tool_results=[result(
                    part.get("callID"), state.get("output", state.get("error", "")),
                    meta.get("exit"), error=state.get("status") == "error")]))
            elif kind == "step_finish":
                tokens = part.get("tokens") or {}
                for turn in reversed(turns):
                    if turn.role == "assistant" and turn.response_id == message_id:
                        cache = tokens.get("cache") or {}
                        turn.input_tokens = (tokens.get("input") or 0) + (cache.get("read") or 0)
                        turn.output_tokens = tokens.get("output")
                        break
            elif kind == "error":
                turns.append(Turn("system", json.dumps(line.get("error", "")), time=time))
        return [t for t in turns if not (t.role == "tool" and not t.tool_results)]
