"""Codex CLI (npm @openai/codex), speaking OpenAI responses."""

from __future__ import annotations

from a2rl.llm import transcript_schema as ts
from a2rl.llm.stacks import AgentStack, Launch, LaunchContext, tee_transcript
from a2rl.llm.wire import OPENAI_RESPONSES


class Codex(AgentStack):
    installer, package = "npm", "@openai/codex"
    binary = "node_modules/.bin/codex"
    home_page = "https://github.com/openai/codex"

    def launch(self, ctx: LaunchContext) -> Launch:
        provider = (f'{{name="a2rl proxy", base_url="{ctx.proxy_url}/v1", '
                    f'env_key="OPENAI_API_KEY", wire_api="responses"}}')
        argv = [self.binary_path(ctx), "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "--cd", ctx.workspace,
                "--model", ctx.model, "-c", 'model_provider="a2rl"',
                "-c", f"model_providers.a2rl={provider}", *ctx.args, ctx.prompt]
        env = {"OPENAI_API_KEY": ctx.api_key}
        return Launch(tee_transcript(argv, self.transcript_path(ctx)), env, OPENAI_RESPONSES)

    def read_transcript(self, lines: list[dict]) -> list[ts.Turn]:
        """``codex exec --json``: item.completed events (agent_message, command_execution with its
        aggregated_output and exit_code, error, ...); no timestamps."""
        turns: list[ts.Turn] = []
        for line in lines:
            if line.get("type") != "item.completed":
                continue
            item = line.get("item") or {}
            kind = item.get("type")
            if kind == "agent_message":
                turns.append(ts.Turn("assistant", item.get("text", ""), response_id=item.get("id")))
            elif kind == "reasoning":
                ts.add_text(ts.assistant_turn(turns, None, None), item.get("text", ""))
            elif kind == "command_execution":
                command = ts.call(item.get("id"), "shell", {"command": item.get("command", "")})
                command.command = ts.unwrap_shell(item.get("command", ""))
                ts.assistant_turn(turns, None, None).tool_calls.append(command)
                ts.tool_turn(turns, None).tool_results.append(ts.result(
                    item.get("id"), item.get("aggregated_output", ""), item.get("exit_code"),
                    error=item.get("status") == "failed"))
            elif kind == "error":
                turns.append(ts.Turn("system", item.get("message", "")))
        return turns
