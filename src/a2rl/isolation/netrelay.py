"""The sandbox's port forwarder: 127.0.0.1:<port> inside the sandbox → a unix socket bound in.

Under network policies ``llm`` and ``allowlist`` the sandbox has its own network namespace (a
loopback only); the run's LLM proxy and egress proxy are reached through unix sockets in
/run/a2rl. Agent CLIs want an http://127.0.0.1:<port> base URL, so this script, run with the
agent's own interpreter before the agent command, listens on those ports and relays each
connection to its socket. It binds every port first (so the agent never finds one closed), forks
the relay, and execs the agent: the agent stays the sandbox's main process (its exit code, its
signals), and the relay dies with the sandbox's pid namespace.

Usage: python relay.py PORT=SOCKET [PORT=SOCKET ...] -- COMMAND [ARGS ...]

A standalone script (standard library only): it is copied into the sandbox, outside a2rl.
"""

import asyncio
import functools
import os
import socket
import sys

CHUNK = 65536


def listen(pairs):
    """One listening socket on 127.0.0.1 per ``PORT=SOCKET``, with the socket path."""
    listening = []
    for pair in pairs:
        port, _, path = pair.partition("=")
        if not port.isdigit() or not path:
            raise SystemExit(f"relay: expected PORT=SOCKET, got {pair!r}")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", int(port)))
        sock.listen(128)
        listening.append((sock, path))
    return listening


async def pipe(reader, writer, counts=None, side=0):
    """Copy until end of stream, then pass the end on (a half close, as HTTP/1 may use);
    ``counts[side]`` (when given) counts the bytes. The egress proxy pipes with it too."""
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            if counts is not None:
                counts[side] += len(data)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        pass


async def relay(path, reader, writer):
    try:
        upstream_reader, upstream_writer = await asyncio.open_unix_connection(path)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
    for side in (writer, upstream_writer):
        side.close()


async def serve(listening):
    for sock, path in listening:
        await asyncio.start_server(functools.partial(relay, path), sock=sock)
    await asyncio.Event().wait()  # until the sandbox ends


def main(argv):
    if "--" not in argv:
        raise SystemExit("relay: usage: relay.py PORT=SOCKET ... -- COMMAND [ARGS ...]")
    split = argv.index("--")
    listening, command = listen(argv[:split]), argv[split + 1:]
    if not command:
        raise SystemExit("relay: no command to run")
    if os.fork() == 0:
        # the relay keeps none of the agent's output streams open: the harness reads them to
        # their end
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            asyncio.run(serve(listening))
        finally:
            os._exit(0)
    for sock, _ in listening:
        sock.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
