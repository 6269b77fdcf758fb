"""A real MCP server (the ``mcp`` SDK) for the tests, run as a program.

Self-contained (the standard library and ``mcp`` only) so that it also runs inline inside a
sandbox: ``python -c SOURCE stdio``. :func:`stdio_command` and :func:`start_http` give the
ways the tests start it. Its tools:

- ``echo(text)``: the text; ``add(a, b)``: ``{"result": a + b}`` (structured content);
- ``fail(message)``: an error result with the message; ``picture()``: text and a PNG image;
- ``where()``: the working directory, the server's process group and two variables;
- ``spawn_child()``: starts a process that leaves the server's session (``setsid``) and
  sleeps; the pid;
- ``crash(code)``: writes to stderr, then exits with ``code`` mid-call; ``sleep(seconds)``;
- ``authorization()``: the ``Authorization`` header of the request (only over HTTP with a token).

Modes (the first argument): ``stdio``; ``http HOST [TOKEN]`` (streamable HTTP on HOST, an
ephemeral port, path ``/mcp``; prints ``port N`` once it listens; with TOKEN, every request
without ``Authorization: Bearer TOKEN`` is answered 401); ``exit-at-start CODE``
(writes to stderr and exits before answering); ``silent`` (reads its input, never answers);
``bad-names`` (``stdio``, plus a tool with an invalid name).
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations, and
# their types are imported in _server.
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The one-pixel PNG ``picture`` returns, base64.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def source() -> str:
    """This module's code (as a program, ``__file__`` is unset: ``python -c`` runs it)."""
    return Path(__file__).read_text(encoding="utf-8")


def stdio_command(mode: str = "stdio", *args: str, python: str = sys.executable) -> list[str]:
    """The command that runs this server over stdio (``mode`` as in the module docstring)."""
    return [python, "-c", source(), mode, *args]


def start_http(host: str = "127.0.0.1", token: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """This server over streamable HTTP on ``host`` (a child process) and its port; with
    ``token``, only requests bearing it are served (the token goes by stdin, not argv)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", source(), "http", host, *(["-"] if token else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    proc.stdin.write(f"{token or ''}\n".encode())
    proc.stdin.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    line = proc.stdout.readline().decode()
    if not line.startswith("port ") or time.monotonic() > deadline:
        proc.kill()
        raise RuntimeError(f"the MCP test server did not start: {line!r}")
    return proc, int(line.split()[1])


@contextmanager
def serving_http(
    host: str = "127.0.0.1", token: str | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """:func:`start_http` for the block: the server process and its port, killed afterwards."""
    proc, port = start_http(host, token)
    try:
        yield proc, port
    finally:
        proc.kill()
        proc.wait(10)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def process_gone(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` is gone within ``within`` seconds."""
    import asyncio

    deadline = time.monotonic() + within
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


#: What the HTTP server last received, for ``authorization()``.
SEEN: dict[str, str] = {}


def _server(bad_names: bool = False, guarded: bool = False):  # type: ignore[no-untyped-def]
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ImageContent, TextContent, ToolAnnotations

    app = MCPServer("airlock-test", log_level="WARNING")

    @app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def fail(message: str) -> str:
        """Fail with the message."""
        raise ToolError(message)

    @app.tool()
    def picture() -> list[TextContent | ImageContent]:
        """A caption and a picture."""
        return [
            TextContent(type="text", text="a pixel"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        ]

    @app.tool()
    def where() -> dict[str, str]:
        """Where the server runs."""
        return {
            "cwd": os.getcwd(),
            "pgid": str(os.getpgid(0)),
            "pid": str(os.getpid()),
            "MCP_TEST_VAR": os.environ.get("MCP_TEST_VAR", ""),
            "AIRLOCK_RUNNER_TOKEN": os.environ.get("AIRLOCK_RUNNER_TOKEN", ""),
        }

    @app.tool()
    def spawn_child() -> int:
        """Start a process that leaves this session and sleeps; its pid."""
        child = subprocess.Popen(
            ["sleep", "300"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return child.pid

    @app.tool()
    def crash(code: int) -> str:
        """Exit mid-call."""
        print("fatal: the test server crashes on purpose", file=sys.stderr, flush=True)
        os._exit(code)

    @app.tool()
    async def sleep(seconds: float) -> str:
        """Sleep, then answer."""
        import anyio

        await anyio.sleep(seconds)
        return "slept"

    if guarded:

        @app.tool()
        def authorization() -> str:
            """The Authorization header this request carried."""
            return SEEN.get("authorization", "")

    if bad_names:
        app.add_tool(lambda: "x", name="bad name!", description="a tool with an invalid name")
    return app


def _require_token(app, token: str):  # type: ignore[no-untyped-def]
    """``app`` (ASGI) refusing every HTTP request that does not bear ``token``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            got = dict(scope["headers"]).get(b"authorization", b"")
            if got != expected:
                plain = [(b"content-type", b"text/plain")]
                await send({"type": "http.response.start", "status": 401, "headers": plain})
                await send({"type": "http.response.body", "body": b"a bearer token is required"})
                return
            SEEN["authorization"] = got.decode()
        await app(scope, receive, send)

    return guarded


def _serve_http(host: str, token: str | None) -> None:
    import socket

    import anyio
    import uvicorn

    app = _server(guarded=token is not None).streamable_http_app(host=host)
    if token:
        app = _require_token(app, token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(64)
    print("port", sock.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    anyio.run(lambda: server.serve(sockets=[sock]))


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "stdio"
    if mode == "http":
        _serve_http(argv[1], sys.stdin.readline().strip() if argv[2:] == ["-"] else None)
    elif mode == "exit-at-start":
        print("fatal: cannot open the database (on purpose)", file=sys.stderr, flush=True)
        sys.exit(int(argv[1]))
    elif mode == "silent":
        for _line in sys.stdin:
            pass
    else:
        _server(bad_names=mode == "bad-names").run()


if __name__ == "__main__":
    main(sys.argv[1:])
