"""``airlock-runner`` / ``python -m airlock.runner``: serve the Runner inside a sandbox.

The runner refuses to start without a token (``--token-file`` or ``AIRLOCK_RUNNER_TOKEN``,
which is then removed from the environment so tool subprocesses never inherit it). Logs are
JSON lines on stdout; the ``serving`` line carries ``startup_ms``, the time from process
start to SERVING. Before reading the token it confines itself (``_confine``: non-dumpable,
a seccomp filter denying ptrace-like calls to it and every tool process) and becomes a child
subreaper that kills tool processes orphaned by a killed bash supervisor; it refuses to start
(exit 2) when it cannot. SIGTERM/SIGINT: stop accepting, let the running turn finish (or cancel
it) within ``--grace-seconds``, exit 0.

It serves health before it imports what only a turn needs (the loop, tools, providers): the
first Execute imports them. ``--preload`` imports them right after SERVING instead, for a
sandbox started ahead of its job (a warm pool member), whose first Execute then starts at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

TOKEN_ENV = "AIRLOCK_RUNNER_TOKEN"
MIN_TOKEN_CHARS = 16


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), or None when unknown."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 overall: starttime, in clock ticks since boot
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


_STARTED = time.monotonic() - (_process_age_s() or 0.0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="airlock-runner", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--listen",
        default="127.0.0.1:50051",
        help="host:port, [ipv6]:port or unix:PATH (default %(default)s; [::]:PORT: every address family)",
    )
    p.add_argument("--token-file", type=Path, help=f"file holding the bearer token (else ${TOKEN_ENV})")
    p.add_argument("--token-file-delete", action="store_true", help="delete the token file after reading it")
    p.add_argument(
        "--workspace", type=Path, default=Path.cwd(), help="root of the sandbox tools (default: cwd)"
    )
    p.add_argument("--tls-cert", type=Path, help="server certificate chain (PEM); needs --tls-key")
    p.add_argument("--tls-key", type=Path, help="server private key (PEM); needs --tls-cert")
    p.add_argument(
        "--max-message-bytes", type=int, default=16 * 1024 * 1024, help="largest message (default 16 MiB)"
    )
    p.add_argument("--max-concurrent", type=int, default=1, help="executions at once (default 1)")
    p.add_argument(
        "--preload",
        action="store_true",
        help="once serving, import what the first turn needs (faster first Execute, more memory idle)",
    )
    p.add_argument(
        "--fence",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="an address this sandbox must not reach; if it accepts a connection, every turn is "
        "refused (repeatable; checked once, before the first turn)",
    )
    p.add_argument(
        "--fence-timeout",
        type=float,
        default=0.5,
        help="seconds one --fence attempt may take (default 0.5)",
    )
    p.add_argument(
        "--exit-with-parent",
        type=int,
        metavar="PID",
        help="stop, with no grace (running turns cancelled, their tool trees killed), as soon as "
        "the process PID is no longer this runner's parent (it died)",
    )
    p.add_argument(
        "--grace-seconds",
        type=float,
        default=10.0,
        help="on SIGTERM, time the running turn gets (default 10)",
    )
    return p


class StartupError(Exception):
    """The runner cannot start (bad flags, no token); the message says why."""


def listen_address(text: str) -> str:
    """``--listen``: ``unix:PATH``, ``HOST:PORT`` or ``[IPV6]:PORT`` (``[::]:50051`` listens on
    every address family: gRPC binds it dual-stack, IPv4 alone on a host without IPv6).

    Raises:
        StartupError: no port, or an IPv6 address without brackets (which gRPC would read as
            another address).
    """
    if text.startswith("unix:"):
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise StartupError(f"--listen: expected HOST:PORT, [IPV6]:PORT or unix:PATH, got {text!r}")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise StartupError(f"--listen: write an IPv6 address in brackets ([::1]:{port}), got {text!r}")
    return text


def read_token(token_file: Path | None, delete: bool) -> str:
    """The bearer token from the file (deleted after reading when asked) or the env var,
    which is removed from the environment either way.

    Raises:
        StartupError: no token, an unreadable file, or a token shorter than 16 characters.
    """
    from_env = os.environ.pop(TOKEN_ENV, None)
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise StartupError(f"cannot read --token-file {token_file}: {e.strerror or e}") from e
        if delete:
            try:
                token_file.unlink()
            except OSError as e:
                raise StartupError(f"cannot delete --token-file {token_file}: {e.strerror or e}") from e
    elif from_env is not None:
        token = from_env.strip()
    else:
        raise StartupError(
            f"no token: pass --token-file or set {TOKEN_ENV}; the runner never runs unauthenticated"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise StartupError(f"the token is too short ({len(token)} characters; at least {MIN_TOKEN_CHARS})")
    return token


async def _serve(args: argparse.Namespace, token: str) -> int:
    from ._log import logger
    from ._server import RunnerConfig, RunnerServer, TlsFiles

    log = logger()
    listen = listen_address(args.listen)
    workspace = args.workspace.resolve()
    if not workspace.is_dir():
        raise StartupError(f"--workspace {workspace} is not a directory")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise StartupError("--tls-cert and --tls-key go together")
    config = RunnerConfig(
        token=token,
        workspace=workspace,
        max_message_bytes=args.max_message_bytes,
        max_concurrent=args.max_concurrent,
        fence=tuple(args.fence),
        fence_timeout_s=args.fence_timeout,
    )
    server = RunnerServer(config)
    tls = TlsFiles(cert=args.tls_cert, key=args.tls_key) if args.tls_cert else None
    address = await server.start(listen, tls=tls)
    log.info(
        "serving",
        extra={
            "address": address,
            "tls": tls is not None,
            "workspace": str(workspace),
            "max_concurrent": args.max_concurrent,
            "max_message_bytes": args.max_message_bytes,
            "pid": os.getpid(),
            "startup_ms": round((time.monotonic() - _STARTED) * 1000, 1),
        },
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.preload:
        started = time.monotonic()
        preload()
        log.info("preloaded", extra={"ms": round((time.monotonic() - started) * 1000, 1)})
    orphaned = asyncio.Event()
    watcher = None
    if args.exit_with_parent is not None:
        from ._parent import watch_parent

        watcher = asyncio.create_task(watch_parent(args.exit_with_parent, orphaned))
        watcher.add_done_callback(lambda _: stop.set())
    await stop.wait()
    grace = 0.0 if orphaned.is_set() else args.grace_seconds
    if watcher is not None:
        watcher.cancel()
    if orphaned.is_set():
        log.warning("the process that started this runner is gone: stopping with no grace")
    log.info("shutting down", extra={"grace_s": grace, "running": server.executions})
    await server.stop(grace)
    log.info("stopped")
    return 0


def preload() -> None:
    """Import what building and running a turn needs, which the runner otherwise imports at
    its first Execute (the first use of a name of airlock.turn, airlock.tools or layer0 loads
    the modules its package defers)."""
    import jsonschema  # noqa: F401  (tool input schemas)

    import airlock.build
    import airlock.providers
    import airlock.state  # noqa: F401
    from airlock import wire
    from airlock.tools import BashTool  # noqa: F401
    from airlock.turn import NeuronTurn  # noqa: F401
    from layer0 import Hook  # noqa: F401

    from . import _environ  # noqa: F401

    for name in wire.__all__:  # the converters an Execute uses load with their modules
        getattr(wire, name)


def confine_self() -> None:
    """Protect the runner from its own tool processes; see ``_confine`` and ``airlock.tools.adopt_orphans``.

    Raises:
        StartupError: a protection cannot be applied (never silently skipped).
    """
    from ._confine import ConfinementError, confine

    try:
        confine()
        from airlock.tools import adopt_orphans

        adopt_orphans()
    except (ConfinementError, OSError) as e:
        raise StartupError(f"cannot protect the runner from its tool processes: {e}") from e


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``airlock-runner``; exits 0 after a graceful stop, 2 on a start-up error."""
    args = _parser().parse_args(argv)
    from ._log import configure, logger

    formatter = configure()
    try:
        confine_self()  # first: before the token is in memory and before any thread starts
        token = read_token(args.token_file, args.token_file_delete)
        formatter.add_secret(token)
        code = asyncio.run(_serve(args, token))
    except StartupError as e:
        logger().error("cannot start: %s", e)
        code = 2
    except Exception as e:  # RunnerError (bind failure, TLS files), …
        logger().error("cannot start: %s: %s", type(e).__name__, e)
        code = 2
    sys.exit(code)


if __name__ == "__main__":
    main()
