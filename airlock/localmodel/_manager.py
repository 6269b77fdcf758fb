"""Start, reuse and stop the local model server (a subprocess in the runtime venv)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import secrets
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
from pydantic import BaseModel, ConfigDict, Field

from ._errors import LocalModelError, ModelFileError, RuntimeSetupError, ServerStartError
from ._fetch import QWEN_CODER_1_5B, ModelSpec, ensure_model, model_path, verify_model
from ._paths import CachePaths
from ._progress import ProgressCallback
from ._runtime import DEFAULT_RUNTIME, RuntimeSpec, ensure_runtime

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
SERVER_SCRIPT = Path(__file__).with_name("_server_main.py")
API_KEY_ENV = "AIRLOCK_LOCALMODEL_API_KEY"  # must match _server_main.API_KEY_ENV
_LOG_TAIL_LINES = 30


class ServerInfo(BaseModel):
    """A running model server, as recorded in its state file."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    pid: int
    host: str
    port: int
    model_id: str
    model_sha256: str
    api_key: str | None = Field(default=None, repr=False)
    log_path: str
    started_at: float

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://host:port/v1``) for the ``openai_compat`` provider."""
        return f"{_origin(self.host, self.port)}/v1"


def _origin(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _address_slug(host: str, port: int) -> str:
    return f"{re.sub(r'[^A-Za-z0-9.]+', '_', host)}-{port}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _listening_port(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith('{"event": "listening"'):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                return int(json.loads(line)["port"])
    return None


async def _wait_gone(pid: int, within: float) -> bool:
    """Poll until ``pid`` is gone (it is not our child, so it cannot be awaited)."""
    end = time.monotonic() + within
    while _pid_alive(pid):
        if time.monotonic() > end:
            return False
        await asyncio.sleep(0.05)
    return True


class LocalModelServer:
    """The airlock-managed local model server.

    ``ensure_ready`` prepares the runtime venv and the verified model file (one-time set-up,
    with progress). ``start`` serves the model on ``host:port`` (or reuses the server already
    running there), ``stop`` ends it. As an async context manager it starts on entry and, if it
    started the server itself, stops it on exit.

    Each start generates an API key, passed to the server through its environment (never argv)
    and kept in the server's state file (mode 0600); clients send it as the bearer token.
    """

    def __init__(
        self,
        *,
        paths: CachePaths | None = None,
        model: ModelSpec = QWEN_CODER_1_5B,
        runtime: RuntimeSpec = DEFAULT_RUNTIME,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        startup_timeout: float = 120.0,
        require_api_key: bool = True,
        python: str | Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        tool_grammar: bool = True,
        trim_schemas: bool = True,
    ) -> None:
        """Configure the server (nothing starts yet).

        Args:
            paths: cache layout (default: ``$AIRLOCK_CACHE_DIR`` or ``~/.cache/airlock``).
            model: which model file to serve.
            runtime: which llama-cpp-python to run it with.
            host: the address to listen on (later: the Docker bridge gateway). Port 0 picks one.
            port: the port to listen on.
            n_ctx: context window in tokens.
            n_threads: generation threads (default: llama.cpp's choice).
            startup_timeout: seconds to wait for ``/health`` after spawning.
            require_api_key: protect ``/v1/*`` with a per-start bearer token.
            python: interpreter for the server (default: the runtime venv's).
            extra_env: extra environment for the server process.
            tool_grammar: constrain tool calls to the offered tools' schemas (a grammar).
            trim_schemas: show the model schemas without titles, ``additionalProperties``,
                null defaults and long descriptions.
        """
        self.paths = paths or CachePaths.default()
        self.model = model
        self.runtime = runtime
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout = startup_timeout
        self.require_api_key = require_api_key
        self._python = Path(python) if python is not None else None
        self._extra_env = dict(extra_env or {})
        self.tool_grammar = tool_grammar
        self.trim_schemas = trim_schemas
        self._proc: asyncio.subprocess.Process | None = None
        self._info: ServerInfo | None = None
        self._started_here = False

    # ---------------------------------------------------------------- properties

    @property
    def info(self) -> ServerInfo | None:
        """The running server (after ``start``), else None."""
        return self._info

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of the running server.

        Raises:
            LocalModelError: the server is not started.
        """
        return self._require_info().base_url

    @property
    def api_key(self) -> str | None:
        """The bearer token clients must send (None when not required)."""
        return self._require_info().api_key

    @property
    def started_here(self) -> bool:
        """True when this object spawned the server (False when it reused a running one)."""
        return self._started_here

    def _require_info(self) -> ServerInfo:
        if self._info is None:
            raise LocalModelError("the local model server is not started")
        return self._info

    def _state_file(self, host: str, port: int) -> Path:
        return self.paths.servers_dir / f"{_address_slug(host, port)}.json"

    # ---------------------------------------------------------------- set-up

    async def ensure_ready(self, progress: ProgressCallback | None = None, *, repair: bool = False) -> None:
        """Prepare the runtime venv and the verified model file (fast when both are cached).

        The model download runs while the runtime wheel compiles when this interpreter has pip.

        Raises:
            RuntimeSetupError: the runtime could not be built or installed.
            ModelFileError: the cached model is corrupt and ``repair`` is False.
            ModelFetchError: fetching the model failed.
        """
        if self._python is not None:
            await ensure_model(self.paths, self.model, progress=progress, repair=repair)
            return
        if importlib.util.find_spec("pip") is not None:
            try:
                async with asyncio.TaskGroup() as group:  # a failure cancels the other part
                    group.create_task(ensure_runtime(self.paths, self.runtime, progress=progress))
                    group.create_task(ensure_model(self.paths, self.model, progress=progress, repair=repair))
            except ExceptionGroup as eg:
                raise eg.exceptions[0] from None
        else:
            await ensure_runtime(self.paths, self.runtime, progress=progress)
            await ensure_model(self.paths, self.model, progress=progress, repair=repair)

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._started_here:
            await self.stop()

    async def _health(self, host: str, port: int) -> dict[str, Any] | None:
        """The server's /health JSON with ``_status`` added, or None when nothing answers."""
        url = _origin(host, port)
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=2.0) as client:
                resp = await client.get(f"{url}/health")
        except httpx.HTTPError:
            return None
        try:
            body = resp.json()
        except ValueError:
            return {"_status": resp.status_code}
        if not isinstance(body, dict):
            return {"_status": resp.status_code}
        body["_status"] = resp.status_code
        return body

    async def _read_state(self, host: str, port: int) -> ServerInfo | None:
        path = self._state_file(host, port)
        try:
            raw = await asyncio.to_thread(path.read_text, encoding="utf-8")
            return ServerInfo.model_validate_json(raw)
        except (OSError, ValueError):
            return None

    async def _recorded_server(self, host: str, port: int) -> ServerInfo | None:
        """The server recorded at this address if it is alive and really ours; else clean up."""
        info = await self._read_state(host, port)
        if info is None:
            return None
        health = await self._health(host, port)
        if health is not None and health.get("pid") == info.pid and _pid_alive(info.pid):
            return info
        if not _pid_alive(info.pid) or health is None or health.get("pid") != info.pid:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(self._state_file(host, port).unlink)
        return None

    async def running(self) -> ServerInfo | None:
        """The healthy server recorded at the configured address, if any (starts nothing)."""
        info = await self._recorded_server(self.host, self.port)
        if info is None:
            return None
        health = await self._health(info.host, info.port)
        return info if health is not None and health.get("_status") == 200 else None

    async def start(
        self, host: str | None = None, port: int | None = None, *, reuse: bool = True
    ) -> ServerInfo:
        """Serve the model on ``host:port``; reuse a healthy server of ours already there.

        Raises:
            ModelFileError: the model file is missing, partial or corrupt.
            RuntimeSetupError: the runtime venv is not set up (call ``ensure_ready``).
            ServerStartError: the server exited or did not become healthy in time; the message
                carries the server's last log lines.
        """
        if self._info is not None:
            return self._info
        host = host or self.host
        port = self.port if port is None else port
        if reuse and port != 0:
            existing = await self._recorded_server(host, port)
            if existing is not None and existing.model_sha256 == self.model.sha256:
                await self._wait_healthy(
                    existing, proc=None, deadline=time.monotonic() + self.startup_timeout
                )
                self._info, self._started_here = existing, False
                return existing
        state = await verify_model(self.paths, self.model)
        if state == "missing":
            raise ModelFileError(
                model_path(self.paths, self.model),
                "missing; fetch it first (ensure_ready / `airlock model fetch`)",
            )
        python = self._python or self.paths.venv_python
        if self._python is None and not python.exists():
            raise RuntimeSetupError(
                f"the model runtime is not set up ({python} missing); "
                "run ensure_ready / `airlock model fetch`"
            )
        info = await self._spawn(str(python), host, port)
        self._info, self._started_here = info, True
        return info

    async def _spawn(self, python: str, host: str, port: int) -> ServerInfo:
        await asyncio.to_thread(self.paths.servers_dir.mkdir, parents=True, exist_ok=True)
        log_path = self.paths.servers_dir / f"{_address_slug(host, port)}.log"
        api_key = secrets.token_urlsafe(32) if self.require_api_key else None
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self._extra_env}
        env.pop(API_KEY_ENV, None)
        if api_key:
            env[API_KEY_ENV] = api_key
        argv = [
            python, "-P", str(SERVER_SCRIPT), "--model", str(model_path(self.paths, self.model)),
            "--model-id", self.model.model_id, "--host", host, "--port", str(port),
            "--n-ctx", str(self.n_ctx),
            *(["--n-threads", str(self.n_threads)] if self.n_threads else []),
            *([] if self.tool_grammar else ["--no-tool-grammar"]),
            *([] if self.trim_schemas else ["--no-trim-schemas"]),
        ]  # fmt: skip
        deadline = time.monotonic() + self.startup_timeout
        log = await asyncio.to_thread(log_path.open, "wb")
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            raise ServerStartError(f"cannot start the model server with {python}: {e}") from e
        finally:
            log.close()
        self._proc = proc
        try:
            bound = port
            while bound == 0 and proc.returncode is None and time.monotonic() < deadline:
                found = await asyncio.to_thread(_listening_port, log_path)
                if found is None:
                    await asyncio.sleep(0.05)
                else:
                    bound = found
            info = ServerInfo(
                pid=proc.pid,
                host=host,
                port=bound,
                model_id=self.model.model_id,
                model_sha256=self.model.sha256,
                api_key=api_key,
                log_path=str(log_path),
                started_at=time.time(),
            )
            await self._wait_healthy(info, proc=proc, deadline=deadline)
        except BaseException:
            await self._terminate(proc.pid, proc)
            self._proc = None
            raise
        await asyncio.to_thread(self._write_state, info)
        return info

    def _write_state(self, info: ServerInfo) -> None:
        path = self._state_file(info.host, info.port)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(info.model_dump_json())
        os.replace(tmp, path)

    async def _wait_healthy(
        self, info: ServerInfo, *, proc: asyncio.subprocess.Process | None, deadline: float
    ) -> None:
        log_path = Path(info.log_path)
        delay = 0.05
        while True:
            if proc is not None and proc.returncode is not None:
                tail = await asyncio.to_thread(_tail, log_path)
                raise ServerStartError(
                    f"the model server exited with code {proc.returncode} before it was ready "
                    f"(model {info.model_id} on {info.host}:{info.port})",
                    tail,
                )
            if proc is None and not _pid_alive(info.pid):
                raise ServerStartError(f"the model server (pid {info.pid}) is gone")
            if info.port != 0:
                health = await self._health(info.host, info.port)
                if health is not None:
                    if health.get("pid") not in (None, info.pid):
                        raise ServerStartError(
                            f"another process answers on {info.host}:{info.port} (pid {health.get('pid')})",
                            await asyncio.to_thread(_tail, log_path),
                        )
                    if health.get("_status") == 200 and health.get("status") == "ok":
                        return
            if time.monotonic() > deadline:
                tail = await asyncio.to_thread(_tail, log_path)
                raise ServerStartError(
                    f"the model server did not become healthy within {self.startup_timeout:.0f}s", tail
                )
            if proc is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), timeout=delay)
            else:
                await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _terminate(self, pid: int, proc: asyncio.subprocess.Process | None) -> None:
        """SIGTERM the server's process group, then SIGKILL after a grace period."""
        grace = 10.0
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            except PermissionError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if proc is not None:
                try:
                    await asyncio.wait_for(proc.wait(), timeout=grace)
                    return
                except TimeoutError:
                    continue
            if await _wait_gone(pid, grace):
                return

    async def stop(self) -> None:
        """Stop the server this object started or reused, else the one recorded at its address.

        Does nothing when no server of ours runs there. Never signals a process that does not
        answer ``/health`` with the recorded pid (a reused pid is not ours).
        """
        info = self._info
        proc = self._proc
        if info is None:
            info = await self._recorded_server(self.host, self.port)
            if info is None:
                return
        elif proc is None:
            # Reused: make sure the recorded pid still is our server before signalling it.
            health = await self._health(info.host, info.port)
            if health is None or health.get("pid") != info.pid:
                info = None
        if info is not None:
            await self._terminate(info.pid, proc)
            state = await self._read_state(info.host, info.port)
            if state is not None and state.pid == info.pid:
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(self._state_file(info.host, info.port).unlink)
        self._info, self._proc, self._started_here = None, None, False
