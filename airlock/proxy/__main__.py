"""``python -m airlock.proxy``: run the egress proxy or a credential proxy.

::

    python -m airlock.proxy egress --listen HOST:PORT --plan-file PLAN.json [--events SINK ...]
    python -m airlock.proxy credentials --listen HOST:PORT --upstream URL --header NAME
        [--value-prefix 'Bearer '] [--credential NAME] (--secret-file F | --secret-env VAR)
        [--ca-file F] [--events SINK ...]
    python -m airlock.proxy bundle --config BUNDLE.json [--wait-config]

``BUNDLE.json`` is a ``BundleConfig`` (``airlock/proxy/bundle.py``): the egress proxy and a
sandbox's credential proxies in one process, as the Docker backend runs them. With
``--wait-config`` a missing file is waited for (a warm pool's proxy, started before its job's
rules and secrets exist); the line ``airlock-proxy bundle waiting for its configuration`` says
so, and SIGTERM ends the wait.

``PLAN.json`` is an ``EgressPlan`` as JSON (``SandboxPlan.egress.model_dump_json()``).
``SINK`` is ``stdout`` (default), ``file:/path`` or ``unix:/path``; repeat for several.
The secret is read once at start from a file or an environment variable, never from argv.
``HOST`` is an address (an IPv6 one in brackets: ``[::1]:3128``), or ``*`` or nothing
(``:3128``) for every address family (``::`` and ``0.0.0.0``; IPv4 alone on a host without
IPv6). When listening, one line ``airlock-proxy <kind> listening on HOST:PORT`` goes to stderr.
SIGTERM/SIGINT stop the proxy after flushing events. Exit status 2 means bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import ssl
import sys
from pathlib import Path

from pydantic import ValidationError

from airlock.policy.plan import EgressPlan, SidecarRoute

from ._events import LineSink, MultiSink, ProxyEventSink
from ._listen import EVERY_FAMILY, host_port_text
from .bundle import BundleConfig, ProxyBundle
from .credentials import CredentialProxy
from .egress import EgressProxy


def _listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPV6]:PORT``, or ``*:PORT`` / ``:PORT`` (every address family)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ":" not in host:
            raise argparse.ArgumentTypeError(f"brackets hold an IPv6 address, got {text!r}")
    elif ":" in host:
        raise argparse.ArgumentTypeError(f"write an IPv6 address in brackets ([::1]:{port}), got {text!r}")
    return host or EVERY_FAMILY, int(port)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m airlock.proxy", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    eg = sub.add_parser("egress", help="the sandbox's HTTP/CONNECT egress proxy")
    eg.add_argument("--listen", type=_listen, required=True, metavar="HOST:PORT")
    eg.add_argument("--plan-file", type=Path, required=True, help="EgressPlan JSON")
    cr = sub.add_parser("credentials", help="a reverse proxy injecting one secret header")
    cr.add_argument("--listen", type=_listen, required=True, metavar="HOST:PORT")
    cr.add_argument("--upstream", required=True, help="upstream base URL, e.g. https://api.anthropic.com")
    cr.add_argument("--header", required=True, help="header carrying the secret, e.g. x-api-key")
    cr.add_argument("--value-prefix", default="", help="text before the secret, e.g. 'Bearer '")
    cr.add_argument("--credential", default="", help="credential name (for events)")
    src = cr.add_mutually_exclusive_group(required=True)
    src.add_argument("--secret-file", type=Path, help="file holding the secret")
    src.add_argument("--secret-env", help="environment variable holding the secret")
    cr.add_argument("--ca-file", type=Path, help="CA bundle for an https upstream (default: system)")
    bu = sub.add_parser("bundle", help="egress + credential proxies of one sandbox (BundleConfig JSON)")
    bu.add_argument("--config", type=Path, required=True, help="BundleConfig JSON")
    bu.add_argument(
        "--wait-config", action="store_true", help="wait for the config file to appear (a warm pool's proxy)"
    )
    for p in (eg, cr):
        p.add_argument(
            "--events", action="append", default=[], metavar="SINK", help="stdout | file:P | unix:P"
        )
    return parser


def _read_secret(args: argparse.Namespace) -> str:
    if args.secret_file is not None:
        try:
            value = args.secret_file.read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as e:
            raise SystemExit(
                f"airlock-proxy: cannot read the secret file {args.secret_file}: {e.strerror}"
            ) from e
        where = f"file {args.secret_file}"
    else:
        value = os.environ.get(args.secret_env, "")
        where = f"env ${args.secret_env}"
    if not value:
        raise SystemExit(f"airlock-proxy: the secret ({where}) is empty or missing")
    return str(value)


async def _serve_bundle(args: argparse.Namespace) -> None:
    if args.wait_config and not await _config_written(args.config):
        return
    try:
        config = BundleConfig.model_validate_json(await asyncio.to_thread(args.config.read_bytes))
    except (OSError, ValidationError) as e:
        raise SystemExit(f"airlock-proxy: invalid bundle config {args.config}: {e}") from e
    try:
        secrets = await asyncio.to_thread(ProxyBundle.read_secrets, config)
    except ValueError as e:
        raise SystemExit(f"airlock-proxy: {e}") from e
    sink = MultiSink(LineSink(t, secrets=secrets) for t in config.events)
    bundle = ProxyBundle(config, sink)
    bound = await bundle.start(secrets)
    stop = _stop_on_signals()
    for what, host, port in bound:
        print(f"airlock-proxy {what} listening on {host_port_text(host, port)}", file=sys.stderr, flush=True)
    print("airlock-proxy bundle ready", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await bundle.aclose()
        await sink.aclose()


async def _config_written(path: Path, poll_s: float = 0.005) -> bool:
    """Wait until ``path`` exists (the backend writes it whole, by renaming); False when a
    SIGTERM/SIGINT came first."""
    if await asyncio.to_thread(path.exists):
        return True
    stop = _stop_on_signals()
    print("airlock-proxy bundle waiting for its configuration", file=sys.stderr, flush=True)
    while not await asyncio.to_thread(path.exists):
        if stop.is_set():
            return False
        await asyncio.sleep(poll_s)
    return True


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM/SIGINT; installed before the "listening" line is printed, so
    a supervisor that signals as soon as it reads that line gets a graceful stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve(args: argparse.Namespace) -> None:
    if args.kind == "bundle":
        await _serve_bundle(args)
        return
    secrets: tuple[str, ...] = ()
    proxy: EgressProxy | CredentialProxy
    sink: ProxyEventSink
    if args.kind == "egress":
        try:
            plan = EgressPlan.model_validate_json(args.plan_file.read_bytes())
        except (OSError, ValidationError) as e:
            raise SystemExit(f"airlock-proxy: invalid plan file {args.plan_file}: {e}") from e
        sink = MultiSink(LineSink(t) for t in args.events or ["stdout"])
        proxy = EgressProxy(plan, sink)
    else:
        try:
            route = SidecarRoute(upstream=args.upstream, header=args.header, value_prefix=args.value_prefix)
        except ValidationError as e:
            raise SystemExit(f"airlock-proxy: invalid route: {e}") from e
        secrets = (_read_secret(args),)
        ctx = ssl.create_default_context(cafile=str(args.ca_file)) if args.ca_file else None
        sink = MultiSink(LineSink(t, secrets=secrets) for t in args.events or ["stdout"])
        proxy = CredentialProxy(route, secrets[0], sink, credential=args.credential, ssl_context=ctx)
    host, port = await proxy.start(*args.listen)
    stop = _stop_on_signals()
    print(f"airlock-proxy {args.kind} listening on {host_port_text(host, port)}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await proxy.aclose()
        await sink.aclose()


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    args = _parser().parse_args(argv)
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
