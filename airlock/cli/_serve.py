"""``airlock serve``: the controller service in the foreground until SIGINT/SIGTERM.

On start it prints where it listens, its data directory and its agents, and — only when it
has just generated the bearer token — the token, once. SIGINT/SIGTERM stop it gracefully:
the server stops accepting calls, running jobs are interrupted and their sandboxes removed,
queued jobs stay queued for the next start, and the command exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from airlock.errors import AirlockError, ConfigError
from layer0 import Layer0Error

from ._common import (
    EXIT_CANCELLED,
    EXIT_OK,
    console,
    err_console,
    exit_code_for_error,
    on_stop_signals,
    report_error,
)

if TYPE_CHECKING:
    from airlock.config import AirlockConfig
    from airlock.controller import Controller, ServerTls
    from airlock.observability import LogFormat, Metrics
    from airlock.web import WebServer

#: Where the OpenAPI document is (airlock.web.OPENAPI_URL, without loading the web stack here).
OPENAPI_URL = "/api/v1/openapi.json"


@dataclass(frozen=True)
class ServeOptions:
    """What ``airlock serve`` was asked for, besides the configuration."""

    address: str
    data_dir: Path | None = None
    concurrency: int = 4
    max_follow_ups: int = 16
    max_depth: int = 4
    parallel_children: int = 4
    as_json: bool = False
    #: Use the token in this existing file (a mounted Secret): never generated, never printed.
    token_file: Path | None = None
    #: Serve with TLS: the certificate chain and key (PEM), and a client CA for mutual TLS.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    #: A PostgreSQL database shared by replicas (None: SQLite in the data dir).
    store: str | None = None
    lease_s: float = 15.0
    #: The audit key in this existing file (shared by replicas), not the data dir's.
    audit_key_file: Path | None = None
    #: Where workspace snapshots keep their files (``dir``, ``dir:PATH``, ``s3://…``, ``off``).
    blob_store: str = "dir"
    #: The process log: ``text`` lines or ``json`` objects; ``/metrics`` on this HOST:PORT.
    log_format: LogFormat = "text"
    metrics_address: str | None = None
    #: The HTTP/JSON API's ``host:port``; None: the default (loopback), skipped with a warning
    #: when in use; ``off`` or empty: none.
    http_address: str | None = None


def _configure_logging(log_format: LogFormat = "text") -> None:
    """The controller's own log (``airlock.*``, INFO and up) on stderr, once."""
    from airlock.observability import log_formatter

    logger = logging.getLogger("airlock")
    if any(getattr(h, "_airlock_serve", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(log_format))
    handler._airlock_serve = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)


def _started(
    controller: Controller, config: AirlockConfig, opts: ServeOptions, web: WebServer | None = None
) -> None:
    """Print what a client needs: the address, the data dir, the agents, the token (once), and
    the HTTP API's address (``web``; None: not served)."""
    service = controller.service
    recovered = [job.id for job in service.recovered] if service is not None else []
    agents = sorted(config.agents)
    if opts.as_json:
        body: dict[str, Any] = {
            "address": controller.address,
            "http_address": web.url if web is not None else None,
            "data_dir": str(controller.data_dir),
            "store": controller.store_where,
            "replica": service.replica if service is not None else None,
            "tls": opts.tls_cert is not None,
            "token_file": str(opts.token_file or controller.token_file),
            "token_created": controller.token_created,
            "agents": agents,
            "settings": {
                "concurrency": opts.concurrency,
                "max_follow_ups": opts.max_follow_ups,
                "max_depth": opts.max_depth,
                "parallel_children": opts.parallel_children,
            },
            "recovered": recovered,
        }
        if controller.token_created:
            body["token"] = controller.token
        print(json.dumps(body), flush=True)
        return

    def say(text: str) -> None:
        console.print(text, highlight=False, soft_wrap=True)

    say(f"[bold]airlock controller[/]: data dir {escape(str(controller.data_dir))}")
    if opts.store is not None and service is not None:
        say(f"  store: {escape(controller.store_where)} (replica {escape(service.replica)})")
    names = ", ".join(agents) if agents else "none"
    say(f"  {len(agents)} agent(s): {escape(names)}")
    say(
        f"  concurrency {opts.concurrency}, max depth {opts.max_depth}, "
        f"max follow-ups {opts.max_follow_ups} per submitted job, "
        f"{opts.parallel_children} children of a tree at once"
    )
    if recovered:
        say(
            f"[yellow]recovered[/]: {len(recovered)} job(s) were running when the previous controller "
            f"stopped; they are marked interrupted and their sandboxes were reaped: {', '.join(recovered)}"
        )
    if controller.token_created:
        say(f"token: {controller.token}")
        say(
            f"  [yellow]generated now and saved (mode 0600) in {escape(str(controller.token_file))}; "
            "it will not be printed again.[/] It is the bootstrap administrator's key: give each "
            "person and service their own (airlock keys create). Clients on this machine read that "
            "file; elsewhere set AIRLOCK_TOKEN or pass --token."
        )
    else:
        say(f"  token: in {escape(str(opts.token_file or controller.token_file))} (not printed)")
    say(f"listening on {controller.address}{_tls_note(opts)}")
    if web is not None:
        say(f"HTTP API on {web.url} (OpenAPI: {web.url}{OPENAPI_URL})")
    say("[dim]Ctrl-C stops it: running jobs are interrupted and their sandboxes removed[/]")
    sys.stdout.flush()


def _tls_note(opts: ServeOptions) -> str:
    if opts.tls_cert is None:
        return " (plaintext)"
    return " (TLS, client certificates required)" if opts.tls_client_ca is not None else " (TLS)"


def _server_tls(opts: ServeOptions) -> ServerTls | None:
    """The TLS files to serve with (None: plaintext).

    Raises:
        ConfigError: a certificate without its key, or the reverse, or a client CA without both.
    """
    from airlock.controller import ServerTls

    if opts.tls_cert is None and opts.tls_key is None:
        if opts.tls_client_ca is not None:
            raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)")
        return None
    if opts.tls_cert is None or opts.tls_key is None:
        raise ConfigError("--tls-cert and --tls-key go together")
    return ServerTls(cert=opts.tls_cert, key=opts.tls_key, client_ca=opts.tls_client_ca)


async def _serve(config: AirlockConfig, opts: ServeOptions) -> None:
    from airlock.controller import Controller, ControllerOptions, ServiceSettings
    from airlock.observability import serve_metrics

    settings = ServiceSettings(
        concurrency=opts.concurrency,
        max_depth=opts.max_depth,
        max_follow_ups=opts.max_follow_ups,
        parallel_children=opts.parallel_children,
        lease_s=opts.lease_s,
    )
    # A --token-file is followed: a rotated Secret takes effect without a restart.
    options = ControllerOptions(
        data_dir=opts.data_dir,
        address=opts.address,
        settings=settings,
        token_file=opts.token_file,
        tls=_server_tls(opts),
        store=opts.store,
        audit_key_file=opts.audit_key_file,
        blob_store=opts.blob_store,
    )
    loop = asyncio.get_running_loop()
    # Each running job makes blocking Docker calls on the default thread pool (min(32, cores+4)
    # threads): give every worker a few so that concurrency is not capped by the pool.
    loop.set_default_executor(
        ThreadPoolExecutor(max_workers=max(32, 4 * opts.concurrency), thread_name_prefix="airlock-serve")
    )
    stop = asyncio.Event()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            stop.set()
        else:
            err_console.print("[yellow]still stopping[/] (removing the running jobs' sandboxes first)")

    with on_stop_signals(on_signal):
        async with (
            serve_metrics(opts.metrics_address) as metrics,
            Controller(config, options) as controller,
            _http_api(controller, opts, metrics) as web,
        ):
            metrics.attach(controller.service)
            async with metrics.census(controller.service):
                _started(controller, config, opts, web)
                await _until_stopped(controller, config, stop)
    err_console.print("stopped")


async def _until_stopped(controller: Controller, config: AirlockConfig, stop: asyncio.Event) -> None:
    """Serve until ``stop``, then say what stopping leaves behind."""
    from ._tool_gate import warn_broken_tools

    # The agents' custom tools are checked in their images while the controller serves
    # (a warning each for those that do not load; their jobs would fail at provisioning).
    checking = asyncio.create_task(warn_broken_tools(config, controller.data_dir))
    # Not controller.wait_for_termination(): cancelling that wait cancels grpc.aio's
    # shutdown future, and the server's stop() then raises CancelledError.
    await stop.wait()
    checking.cancel()
    await asyncio.gather(checking, return_exceptions=True)
    running = controller.service.running_count if controller.service is not None else 0
    queued = await controller.service.queued_count() if controller.service is not None else 0
    what = (
        f"interrupting {running} running job(s) and removing their sandboxes (each resumes from "
        "its last checkpoint at the next start, where its agent allows)"
        if running
        else ""
    )
    keep = f"{queued} queued job(s) stay queued for the next start" if queued else ""
    detail = "; ".join(p for p in (what, keep) if p)
    err_console.print(f"[yellow]stopping[/]{': ' + detail if detail else ''}", highlight=False)


@contextlib.asynccontextmanager
async def _http_api(
    controller: Controller, opts: ServeOptions, metrics: Metrics
) -> AsyncIterator[WebServer | None]:
    """The HTTP/JSON API beside gRPC on the controller's loop, with ``metrics`` at ``/metrics``
    to authenticated callers (None: off, or the default address in use: a warning; an address
    asked for that cannot be served stops the command).

    Raises:
        WebServerError: ``--http-address`` cannot be bound or served.
    """
    from airlock.observability import metrics_app
    from airlock.web import DEFAULT_HTTP_ADDRESS, WebServer, WebServerError, WebTls, controller_app

    address = opts.http_address if opts.http_address is not None else DEFAULT_HTTP_ADDRESS
    if address.strip().lower() in ("", "off"):
        yield None
        return
    tls = WebTls(opts.tls_cert, opts.tls_key, opts.tls_client_ca) if opts.tls_cert and opts.tls_key else None
    app = controller_app(controller, mounts={"/metrics": metrics_app(metrics)})
    web = WebServer(app, address, tls=tls)
    try:
        await web.__aenter__()
    except WebServerError as e:
        if opts.http_address is not None:
            raise
        err_console.print(f"[yellow]warning[/]: no HTTP API: {escape(str(e))} (--http-address to choose)")
        yield None
        return
    try:
        yield web
    finally:
        await web.__aexit__(None, None, None)


def serve(config: AirlockConfig, opts: ServeOptions) -> None:
    """Run the controller until SIGINT/SIGTERM; exit 0 after a graceful stop."""
    _configure_logging(opts.log_format)
    try:
        asyncio.run(_serve(config, opts))
    except KeyboardInterrupt:  # before the handlers were installed (or after they were removed)
        err_console.print("[yellow]interrupted[/]")
        raise typer.Exit(EXIT_CANCELLED) from None
    except (AirlockError, Layer0Error) as e:
        if opts.as_json:
            error = {"type": type(e).__name__, "message": str(e)}
            print(json.dumps({"error": error, "exit_code": exit_code_for_error(e)}))
        report_error(e)
    raise typer.Exit(EXIT_OK)
