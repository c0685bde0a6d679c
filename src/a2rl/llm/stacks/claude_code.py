"""Claude Code (npm @anthropic-ai/claude-code), speaking Anthropic messages."""

from __future__ import annotations

from a2rl.llm import transcript_schema as ts
from a2rl.llm.stacks import AgentStack, Launch, LaunchContext, tee_transcript
from a2rl.llm.wire import ANTHROPIC


class ClaudeCode(AgentStack):
    installer, package = "npm", "@anthropic-ai/claude-code"
    binary = "node_modules/.bin/claude"
    home_page = "https://github.com/anthropics/claude-code"

    def launch(self, ctx: LaunchContext) -> Launch:
        argv = [self.binary_path(ctx), "-p", ctx.prompt, "--model", ctx.model,
                "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", *ctx.args]
        model = ctx.model
        env = {"ANTHROPIC_BASE_URL": ctx.proxy_url, "ANTHROPIC_API_KEY": ctx.api_key,
               "ANTHROPIC_MODEL": model, "ANTHROPIC_SMALL_FAST_MODEL": model,
               "ANTHROPIC_DEFAULT_OPUS_MODEL": model, "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
               "ANTHROPIC_DEFAULT_HAIKU_MODEL": model, "CLAUDE_CODE_SUBAGENT_MODEL": model,
               "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "BASH_DEFAULT_TIMEOUT_MS": "600000", "BASH_MAX_TIMEOUT_MS": "3600000"}
        return Launch(tee_transcript(argv, self.transcript_path(ctx)), env, ANTHROPIC)

    def read_transcript(self, lines: list[dict]) -> list[ts.Turn]:
        """``claude -p --output-format stream-json --verbose``: one line per content block of an
        assistant message (same message.id), user lines carrying tool_result blocks."""
        turns: list[ts.Turn] = []
        for line in lines:
            kind, time = line.get("type"), ts.iso(line.get("timestamp"))
            message = line.get("message") or {}
            if kind == "assistant":
                turn = ts.assistant_turn(turns, message.get("id"), time)
                usage = message.get("usage") or {}
                if usage.get("input_tokens") is not None:
                    turn.input_tokens = usage["input_tokens"] + usage.get(
                        "cache_read_input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)
                for block in message.get("content") or []:
                    if block.get("type") == "text":
                        ts.add_text(turn, block.get("text", ""))
                    elif block.get("type") == "tool_use":
                        turn.tool_calls.append(ts.call(block.get("id"), block.get("name", ""),
                                                    block.get("input")))
            elif kind == "user":
                content = message.get("content")
                if isinstance(content, str):
                    turns.append(ts.Turn("user", content, time=time))
                    continue
                for block in content or []:
                    if block.get("type") == "tool_result":
                        ts.tool_turn(turns, time).tool_results.append(ts.result(
                            block.get("tool_use_id"), ts.text_of(block.get("content")),
                            error=bool(block.get("is_error"))))
            elif kind == "result" and line.get("is_error"):
                turns.append(ts.Turn("system", str(line.get("result", "")), time=time))
        return turns
