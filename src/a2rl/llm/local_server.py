"""An OpenAI-compatible server for an open-weight model on CPU, over transformers: the ``local``
driver's server where no GPU (and so no vLLM) is at hand (``a2rl.llm.local_driver`` starts it in
a process of its own, outside the sandbox, for one run).

It serves ``GET /v1/models`` and ``POST /v1/chat/completions``, whole or streamed (server-sent
events, the usage chunk when ``stream_options.include_usage`` asks for it), and only to a caller
presenting its key (``Authorization: Bearer``), which only the run's recording proxy holds:
an agent reaches the model through the proxy, as it reaches a paid API.

What it does not do, and says so in the protocol's own terms:

* tool calls: a request that offers tools gets the model's reply as plain content
  (``finish_reason`` stop), which is what a small model that cannot call tools gives; the agent
  sees an honest answer without a call;
* long prompts: a prompt longer than ``max_context`` less the reply's room keeps its last tokens
  (the newest turns), as a sliding window; the usage reports the tokens the model read;
* one request at a time: generation is serialised (a CPU has no room for two).

    python -m a2rl.llm.local_server --model <HF folder> --name <served name>
        [--max-context 4096] [--max-new-tokens 512] [--threads N]

reads its key from ``$A2RL_LOCAL_SERVER_KEY``, listens on 127.0.0.1 (a free port), prints one
JSON line ``{"url": ...}`` once it serves, and exits when its standard input closes (the harness
that started it is gone or done).
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from a2rl.llm.loopback import LoopbackServer
from a2rl.llm.parse import text_of
from a2rl.llm.render import render_error, turn_response
from a2rl.llm.wire import OPENAI_CHAT, Turn

KEY_ENV = "A2RL_LOCAL_SERVER_KEY"
CHAT_PATH = "/v1/chat/completions"


@dataclass
class Reply:
    text: str
    input_tokens: int
    output_tokens: int
    truncated_tokens: int  # prompt tokens left out to fit the context


def chat_messages(body: dict[str, Any]) -> list[dict[str, str]]:
    """The request's messages as plain {role, content} strings a chat template takes: content
    parts joined, an assistant's tool calls written out as JSON, tool results as ``tool``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    out = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValueError("each message must be an object with a role")
        role = "system" if message["role"] == "developer" else message["role"]
        text = text_of(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = (call or {}).get("function") or {}
            text += "\n" + json.dumps({"name": function.get("name"),
                                       "arguments": function.get("arguments")})
        out.append({"role": role, "content": text.strip()})
    return out


class Generator:
    """The model and its tokenizer, generating one reply at a time."""

    def __init__(self, folder: Path, max_context: int, max_new_tokens: int):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        self.max_context = max_context
        self.max_new_tokens = max_new_tokens
        self._lock = threading.Lock()

    def reply(self, messages: list[dict[str, str]], max_tokens: Optional[int],
              temperature: float, stop: list[str]) -> Reply:
        new = min(self.max_new_tokens, max_tokens or self.max_new_tokens)
        prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                    tokenize=False)
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        room = max(1, self.max_context - new)
        truncated = max(0, len(ids) - room)
        ids = ids[truncated:]
        tensor = self.torch.tensor([ids])
        options: dict[str, Any] = {"max_new_tokens": new, "do_sample": temperature > 0,
                                   "pad_token_id": self.tokenizer.pad_token_id
                                   or self.tokenizer.eos_token_id}
        if temperature > 0:
            options["temperature"] = temperature
        if stop:
            options |= {"stop_strings": stop, "tokenizer": self.tokenizer}
        with self._lock, self.torch.inference_mode():
            out = self.model.generate(tensor, attention_mask=self.torch.ones_like(tensor),
                                      **options)
        generated = out[0, len(ids):].tolist()
        text = self.tokenizer.decode(generated, skip_special_tokens=True)
        for marker in stop:  # generate stops after the string; the API leaves it out
            text = text.split(marker, 1)[0]
        return Reply(text.strip(), len(ids), len(generated), truncated)


def create_app(generator: Generator, name: str, key: str) -> FastAPI:
    app = FastAPI(title="a2rl local model server", docs_url=None, redoc_url=None,
                  openapi_url=None)

    @app.middleware("http")
    async def only_with_the_key(request: Request, call_next):
        presented = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(presented.encode(), key.encode()):
            return JSONResponse(render_error(OPENAI_CHAT, 401, "invalid API key",
                                             "invalid_api_key"), 401)
        return await call_next(request)

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model",
                                             "owned_by": "a2rl-local"}]}

    @app.post(CHAT_PATH)
    def chat(body: dict[str, Any]):
        try:
            messages = chat_messages(body)
            stop = body.get("stop") or []
            stop = [stop] if isinstance(stop, str) else [str(s) for s in stop]
            max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
            temperature = float(body.get("temperature") or 0.0)
        except (ValueError, TypeError) as err:
            return JSONResponse(render_error(OPENAI_CHAT, 400, str(err),
                                             "invalid_request_error"), 400)
        reply = generator.reply(messages, int(max_tokens) if max_tokens else None,
                                temperature, stop)
        if reply.truncated_tokens:
            print(f"prompt cut by {reply.truncated_tokens} tokens to fit "
                  f"{generator.max_context}", file=sys.stderr, flush=True)
        turn = Turn(text=reply.text, input_tokens=reply.input_tokens,
                    output_tokens=reply.output_tokens, model=name)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return turn_response(OPENAI_CHAT, turn, bool(body.get("stream")), False, include_usage)

    return app


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="an HF model folder")
    parser.add_argument("--name", required=True, help="the model's name in the API")
    parser.add_argument("--max-context", type=int, default=4096)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    key = os.environ.get(KEY_ENV)
    if not key:
        parser.error(f"${KEY_ENV} must hold the key callers present")
    generator = Generator(args.model, args.max_context, args.max_new_tokens)
    if args.threads:
        generator.torch.set_num_threads(args.threads)
    server = LoopbackServer(create_app(generator, args.name, key), "a2rl-local-model").start()
    print(json.dumps({"url": server.url}), flush=True)
    sys.stdin.read()  # until the harness closes the pipe (or is gone)
    # at once: a reply being generated is for a run that has ended, and torch's threads do
    # not wind down gracefully
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
