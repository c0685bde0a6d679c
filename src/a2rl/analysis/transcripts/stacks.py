"""One reader per agent stack's native transcript format, each turning the parsed lines
into ``Turn``s of the common schema (a2rl.llm.transcript_schema)."""

from __future__ import annotations

import json

from a2rl.llm.transcript_schema import (
    Turn,
    add_text,
    assistant_turn,
    call,
    iso,
    result,
    text_of,
    tool_turn,
    unwrap_shell,
)


def claude_code(lines: list[dict]) -> list[Turn]:
    """``claude -p --output-format stream-json --verbose``: one line per content block of an
    assistant message (same message.id), user lines carrying tool_result blocks."""
    turns: list[Turn] = []
    for line in lines:
        kind, time = line.get("type"), iso(line.get("timestamp"))
        message = line.get("message") or {}
        if kind == "assistant":
            turn = assistant_turn(turns, message.get("id"), time)
            usage = message.get("usage") or {}
            if usage.get("input_tokens") is not None:
                turn.input_tokens = usage["input_tokens"] + usage.get(
                    "cache_read_input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)
            for block in message.get("content") or []:
                if block.get("type") == "text":
                    add_text(turn, block.get("text", ""))
                elif block.get("type") == "tool_use":
                    turn.tool_calls.append(call(block.get("id"), block.get("name", ""),
                                                block.get("input")))
        elif kind == "user":
            content = message.get("content")
            if isinstance(content, str):
                turns.append(Turn("user", content, time=time))
                continue
            for block in content or []:
                if block.get("type") == "tool_result":
                    tool_turn(turns, time).tool_results.append(result(
                        block.get("tool_use_id"), text_of(block.get("content")),
                        error=bool(block.get("is_error"))))
        elif kind == "result" and line.get("is_error"):
            turns.append(Turn("system", str(line.get("result", "")), time=time))
    return turns


def codex(lines: list[dict]) -> list[Turn]:
    """``codex exec --json``: item.completed events (agent_message, command_execution with its
    aggregated_output and exit_code, error, ...); no timestamps."""
    turns: list[Turn] = []
    for line in lines:
        if line.get("type") != "item.completed":
            continue
        item = line.get("item") or {}
        kind = item.get("type")
        if kind == "agent_message":
            turns.append(Turn("assistant", item.get("text", ""), response_id=item.get("id")))
        elif kind == "reasoning":
            add_text(assistant_turn(turns, None, None), item.get("text", ""))
        elif kind == "command_execution":
            command = call(item.get("id"), "shell", {"command": item.get("command", "")})
            command.command = unwrap_shell(item.get("command", ""))
            assistant_turn(turns, None, None).tool_calls.append(command)
            tool_turn(turns, None).tool_results.append(result(
                item.get("id"), item.get("aggregated_output", ""), item.get("exit_code"),
                error=item.get("status") == "failed"))
        elif kind == "error":
            turns.append(Turn("system", item.get("message", "")))
    return turns


def gemini_cli(lines: list[dict]) -> list[Turn]:
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


def opencode(lines: list[dict]) -> list[Turn]:
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


def mini_swe_agent(lines: list[dict]) -> list[Turn]:
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


def openhands(lines: list[dict]) -> list[Turn]:
    """OpenHands agent-SDK events: MessageEvent (user or agent ``llm_message``), ActionEvent
    (``thought``, ``action`` with its ``command``, ``tool_call_id``, ``llm_response_id``),
    ObservationEvent (``observation`` with ``content`` and ``exit_code``), AgentErrorEvent."""
    turns: list[Turn] = []
    for event in lines:
        kind, time = event.get("kind"), iso(event.get("timestamp"))
        if kind == "MessageEvent":
            message = event.get("llm_message") or {}
            role = "assistant" if event.get("source") == "agent" else "user"
            turns.append(Turn(role, text_of(message.get("content")), time=time))
        elif kind == "ActionEvent":
            turn = assistant_turn(turns, event.get("llm_response_id"), time)
            add_text(turn, text_of(event.get("thought")))
            action = dict(event.get("action") or {})
            action.pop("kind", None)
            name = event.get("tool_name") or ""
            if name == "finish":
                add_text(turn, str(action.get("message", "")))
            turn.tool_calls.append(call(event.get("tool_call_id"), name, action))
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            observation = event.get("observation") or {}
            output = text_of(observation.get("content")) or observation.get("output") or \
                event.get("error", "")
            exit_code = observation.get("exit_code")
            if exit_code is None:
                exit_code = (observation.get("metadata") or {}).get("exit_code")
            tool_turn(turns, time).tool_results.append(result(
                event.get("tool_call_id"), output, exit_code if exit_code != -1 else None,
                error=kind != "ObservationEvent" or bool(observation.get("is_error"))))
        elif kind == "ConversationErrorEvent":
            turns.append(Turn("system", str(event.get("detail", "")), time=time))
    return turns
