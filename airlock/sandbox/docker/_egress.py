"""The Docker rendering of a :class:`~.policy.SandboxPlan`: networks, proxy container, credentials.

Topology of a sandbox whose plan allows some egress (or uses a sidecar credential)::

    sandbox ──(internal network, no gateway)── proxy container ──(egress network)── destinations
                                                 egress proxy :3128
                                                 credential proxies :8081…

* The sandbox joins only a per-sandbox **internal** network (on a /28 of its own from
  ``backends.docker.internal_subnets``, :mod:`._subnets`) created with
  ``internal=True`` and ``com.docker.network.bridge.inhibit_ipv4``: no route out, and no
  address of the host on that bridge either (a plain internal network still lets a
  container reach the host's services through the gateway IP; measured). Its DNS forwards
  to nothing (``dns=127.0.0.1``): names outside the internal network do not resolve.
* The **proxy container** (the runner image, running ``python -m airlock.proxy bundle``)
  joins the internal network under the alias ``airlock-proxy`` and the egress network(s).
  It admits only peers from the internal network's subnet. It is hardened like the sandbox
  (non-root, read-only, no capabilities, no-new-privileges, pid and memory limits). It
  resolves only names a name rule allows; without name rules its DNS forwards to nothing.
* The sandbox gets ``HTTP_PROXY``/``HTTPS_PROXY`` pointing at the egress proxy and
  ``NO_PROXY=airlock-proxy`` (credential proxies are reached directly); traffic that ignores
  the proxy has no route.
* **Sidecar credentials**: the secret is written to a 0400 file in the proxy's own directory
  (mounted read-only into the proxy container only) and read once by the bundle; the
  runner's provider ``base_url`` is pointed at the credential proxy. The sandbox's env,
  files and ``docker inspect`` never hold the value.
* **env_var / file credentials** enter the sandbox: env in its environment, files as
  read-only bind mounts of 0400 files owned by the sandbox user (under the state directory:
  keep it on a tmpfs such as ``/run``), removed at teardown.
* Every proxy decision is a JSON line on a Unix socket in the proxy directory, read by the
  controller and handed to the run's event sink as :class:`~airlock.proxy.EgressEvent` /
  :class:`~airlock.proxy.CredentialProxyEvent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Sequence
from ipaddress import IPv4Network
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airlock.images import docker_errors
from airlock.policy import CredentialPlacement, ResolvedCredentials, SandboxPlan, redact
from layer0 import EnvError

from ._remove import force_remove
from ._settings import DockerSettings
from ._subnets import allocate

if TYPE_CHECKING:
    from airlock.sandbox._events import SandboxEventSink

__all__ = [
    "EGRESS_NETWORK",
    "PROXY_ALIAS",
    "EgressWiring",
    "ensure_egress_network",
    "proxy_urls",
]

_log = logging.getLogger("airlock.sandbox.docker.egress")

#: The shared egress network (a normal bridge, containers isolated from each other).
EGRESS_NETWORK = "airlock-egress"
#: The proxy container's name on the sandbox's internal network.
PROXY_ALIAS = "airlock-proxy"
PROXY_DIR = "/run/airlock-proxy"
EGRESS_PORT = 3128
CREDENTIAL_PORT_BASE = 8081
_READY_LINE = "airlock-proxy bundle ready"
_WAITING_LINE = "airlock-proxy bundle waiting for its configuration"
_LABEL_EGRESS = "airlock.egress"


def proxy_urls(ports: dict[str, int]) -> dict[str, str]:
    """Each sidecar credential's proxy URL as the sandbox reaches it (by the proxy's alias)."""
    return {name: f"http://{PROXY_ALIAS}:{port}" for name, port in ports.items()}


def ensure_egress_network(client: Any, name: str = EGRESS_NETWORK) -> Any:
    """The shared egress network, created on first use (blocking)."""
    errors = docker_errors()
    found = client.networks.list(names=[name])
    exact = [n for n in found if n.name == name]
    if exact:
        return exact[0]
    try:
        return client.networks.create(
            name,
            driver="bridge",
            check_duplicate=True,
            labels={_LABEL_EGRESS: "1"},
            options={"com.docker.network.bridge.enable_icc": "false"},
        )
    except errors.APIError:  # created meanwhile by someone else
        exact = [n for n in client.networks.list(names=[name]) if n.name == name]
        if exact:
            return exact[0]
        raise


def network_gateway(network: Any) -> str | None:
    """The host's address on ``network`` (None when it has none)."""
    network.reload()
    for cfg in (network.attrs.get("IPAM") or {}).get("Config") or []:
        if cfg.get("Gateway"):
            return str(cfg["Gateway"])
    return None


class EgressWiring:
    """The network side of one sandbox: internal network, proxy container, credentials.

    Blocking methods (``create``, ``remove``) run in a thread; ``serve_events``,
    ``wait_ready`` and ``close_events`` are async.
    """

    def __init__(
        self,
        *,
        client: Any,
        sandbox_id: str,
        state_dir: Path,
        labels: dict[str, str],
        user: tuple[int, int],
        root: bool,
        image: str,
        plan: SandboxPlan,
        credentials: ResolvedCredentials,
        egress_networks: Sequence[str],
        events: SandboxEventSink | None,
        settings: DockerSettings | None = None,
        late: tuple[bool] | None = None,
    ) -> None:
        """``late=(resolves_names,)``: a warm pool member's wiring, its network and proxy up
        before any plan: ``plan`` is then empty and :meth:`bind` gives the job's (the proxy
        waits for its configuration; ``resolves_names`` fixes its DNS, as a name rule would)."""
        self.client = client
        #: The internal network's subnet range and size (``backends.docker``).
        self.settings = settings or DockerSettings()
        self.sandbox_id = sandbox_id
        self.labels = labels
        self.user = user
        self._root = root
        self.image = image
        self.plan = plan
        self.credentials = credentials
        self.egress_networks = tuple(egress_networks)
        self.events = events
        self.proxy_dir = state_dir / f"{sandbox_id}.proxy"
        self.files_dir = state_dir / f"{sandbox_id}.files"
        self.network: Any = None
        self.proxy: Any = None
        self.subnet = ""
        self.ports = _ports(plan)
        #: Whether the job's plan is known (a warm member's is bound when a job claims it).
        self.bound = late is None
        self.networked = not self.bound or plan.needs_egress_proxy or bool(plan.sidecars)
        self.resolves_names = late[0] if late is not None else plan.egress.resolves_names
        self._events_server: asyncio.Server | None = None
        self._event_tasks: set[asyncio.Task[None]] = set()
        self.events_seen = 0
        # The task whose cancellation ends a wait for a free subnet (None outside a loop).
        try:
            self._owner: asyncio.Task[Any] | None = asyncio.current_task()
        except RuntimeError:
            self._owner = None

    @property
    def needs_network(self) -> bool:
        """Whether the sandbox needs the internal network and the proxy."""
        return self.networked

    def bind(
        self, plan: SandboxPlan, credentials: ResolvedCredentials, events: SandboxEventSink | None
    ) -> None:
        """Give a warm member's proxy its job: the sidecar secrets, then the configuration,
        written whole (by a rename) so the waiting proxy never reads half of it (blocking)."""
        assert not self.bound, "bound twice"
        self.plan, self.credentials, self.events = plan, credentials, events
        self.ports = _ports(plan)
        self.bound = True
        self._write_sidecar_secrets()
        staged = self.proxy_dir / "config.json.tmp"
        staged.write_text(self.bundle_config_json(), encoding="utf-8")
        os.chmod(staged, 0o444)
        os.rename(staged, self.proxy_dir / "config.json")

    # -- sandbox side ---------------------------------------------------------------------

    def sandbox_settings(self) -> dict[str, Any]:
        """Extra ``containers.create`` settings for the sandbox (env, mounts, network)."""
        env: dict[str, str] = {}
        volumes: dict[str, dict[str, str]] = {}
        for i, c in enumerate(self.plan.credentials):
            if c.kind == "env_var":
                assert c.var_name is not None
                env[c.var_name] = self.credentials.values[c.name]
            elif c.kind == "file":
                assert c.path is not None
                volumes[str(self.files_dir / f"{i}")] = {"bind": c.path, "mode": "ro"}
        settings: dict[str, Any] = {"environment": env, "volumes": volumes}
        if self.needs_network:
            proxy = f"http://{PROXY_ALIAS}:{EGRESS_PORT}"
            env.update(
                {
                    "HTTP_PROXY": proxy,
                    "HTTPS_PROXY": proxy,
                    "http_proxy": proxy,
                    "https_proxy": proxy,
                    "NO_PROXY": PROXY_ALIAS,
                    "no_proxy": PROXY_ALIAS,
                }
            )
            settings["network"] = self.network.name
            # Docker's embedded DNS still answers names on the internal network (the proxy's
            # alias); anything else is forwarded to nothing and fails within ~2 s, not 20 s.
            settings["dns"] = ["127.0.0.1"]
            settings["dns_opt"] = ["timeout:1", "attempts:1"]
        return settings

    # -- provisioning (blocking) ----------------------------------------------------------

    def write_files(self) -> None:
        """Write file credentials (0400, sandbox user) and the proxy's directory."""
        files = [(i, c) for i, c in enumerate(self.plan.credentials) if c.kind == "file"]
        if files:
            self.files_dir.mkdir(mode=0o755)
            for i, c in files:
                self._write_secret(self.files_dir / f"{i}", self.credentials.values[c.name], self.user)
        if self.needs_network:
            self.proxy_dir.mkdir(mode=0o755)
            self._write_sidecar_secrets()

    def _write_sidecar_secrets(self) -> None:
        proxy_user = (65534, 65534) if self._root else self.user
        for c in self.plan.sidecars:
            self._write_secret(self._secret_path(c), self.credentials.values[c.name], proxy_user)

    def _secret_path(self, c: CredentialPlacement) -> Path:
        return self.proxy_dir / f"secret-{self.ports[c.name]}"

    def _write_secret(self, path: Path, value: str, owner: tuple[int, int]) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(value)
        if self._root:
            os.chown(path, *owner)

    def create_network(self) -> None:
        """The internal network (no route out, no host address on it), on a small subnet of
        its own from ``internal_subnets`` (:mod:`._subnets`); waits up to
        ``internal_subnet_wait`` while the range is full, then fails having created nothing."""
        import docker.types

        errors = docker_errors()
        name = f"airlock-{self.sandbox_id}"

        def create(subnet: IPv4Network) -> Any:
            ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=str(subnet))])
            return self.client.networks.create(
                name,
                driver="bridge",
                internal=True,
                check_duplicate=True,
                labels=dict(self.labels),
                options={"com.docker.network.bridge.inhibit_ipv4": "true"},
                ipam=ipam,
            )

        settings = self.settings
        try:
            self.network, subnet = allocate(
                self.client,
                settings.internal_range,
                settings.internal_prefix,
                create,
                wait=settings.internal_subnet_wait,
                what=f"internal network of sandbox {self.sandbox_id}",
                cancelled=self._cancelled,
            )
        except errors.DockerException:
            # A create that failed late (a timeout) may still have made it: teardown removes it.
            with contextlib.suppress(errors.DockerException):
                found = [n for n in self.client.networks.list(names=[name]) if n.name == name]
                self.network = found[0] if found else None
            raise
        self.network.reload()
        configs = (self.network.attrs.get("IPAM") or {}).get("Config") or []
        if str(subnet) not in [str(c.get("Subnet")) for c in configs]:
            raise EnvError.provision_failed(
                f"internal network of {self.sandbox_id} lacks the subnet {subnet} it was created with"
            )
        self.subnet = str(subnet)

    def _cancelled(self) -> bool:
        """Whether the task that created this wiring was cancelled (read from a thread)."""
        task = self._owner
        return task is not None and (task.done() or task.cancelling() > 0)

    def bundle_config_json(self) -> str:
        """The proxy bundle's configuration (no secret values: only their file paths)."""
        from airlock.proxy.bundle import BundleConfig, CredentialListener

        listeners = []
        for c in self.plan.sidecars:
            assert c.route is not None
            listeners.append(
                CredentialListener(
                    credential=c.name,
                    route=c.route,
                    port=self.ports[c.name],
                    secret_file=f"{PROXY_DIR}/{self._secret_path(c).name}",
                )
            )
        config = BundleConfig(
            egress_port=EGRESS_PORT,
            plan=self.plan.egress,
            credentials=tuple(listeners),
            clients=(self.subnet,),
            events=(f"unix:{PROXY_DIR}/events.sock",),
        )
        return config.model_dump_json()

    def create_proxy(self, limits_pids: int = 64, memory: int = 256 * 2**20) -> None:
        """Create (not start) the proxy container on the internal and egress networks."""
        errors = docker_errors()
        config_path = self.proxy_dir / "config.json"
        if self.bound:
            config_path.write_text(self.bundle_config_json(), encoding="utf-8")
            os.chmod(config_path, 0o444)
        networking = self.client.api.create_networking_config(
            {self.network.name: self.client.api.create_endpoint_config(aliases=[PROXY_ALIAS])}
        )
        uid, gid = (65534, 65534) if self._root else self.user
        host_config = self.client.api.create_host_config(
            binds={str(self.proxy_dir): {"bind": PROXY_DIR, "mode": "ro"}},
            network_mode=self.network.name,
            read_only=True,
            privileged=False,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            pids_limit=limits_pids,
            mem_limit=memory,
            memswap_limit=memory,
            init=True,
            tmpfs={"/tmp": "rw,nosuid,nodev,noexec,size=16m"},
            log_config={"type": "json-file", "config": {"max-size": "1m", "max-file": "1"}},
            **self.proxy_dns(),
        )
        try:
            created = self.client.api.create_container(
                image=self.image,
                entrypoint=["/opt/venv/bin/python", "-m", "airlock.proxy"],
                command=[
                    "bundle",
                    "--config",
                    f"{PROXY_DIR}/config.json",
                    *([] if self.bound else ["--wait-config"]),
                ],
                name=f"airlock-{self.sandbox_id}-proxy",
                hostname="airlock-proxy",
                user=f"{uid}:{gid}",
                labels={**self.labels, "airlock.role": "proxy"},
                environment={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"},
                host_config=host_config,
                networking_config=networking,
            )
            self.proxy = self.client.containers.get(created["Id"])
            for name in self.egress_networks:
                self.client.api.connect_container_to_network(self.proxy.id, name)
            self.proxy.start()
        except errors.NotFound as e:
            raise EnvError.provision_failed(
                f"cannot start the egress proxy of {self.sandbox_id}: {e.explanation or e} "
                "(is the egress network there? is the image built: airlock images build?)"
            ) from e
        except errors.DockerException as e:
            raise EnvError.provision_failed(f"cannot start the egress proxy of {self.sandbox_id}: {e}") from e

    def proxy_dns(self) -> dict[str, list[str]]:
        """The proxy container's DNS: none at all unless a name rule needs it.

        The egress proxy resolves only names a name rule allows (``precheck``), and a
        sidecar's upstream name is such a name. A plan without name rules (IP literals and
        CIDRs only, like the local-model demo) needs no resolution: its DNS forwards to
        nothing (``127.0.0.1``), so even a bug in the proxy could not leak a name. With name
        rules the engine's resolver stays; the proxy never asks it about other names.
        """
        if self.resolves_names:
            return {}
        return {"dns": ["127.0.0.1"], "dns_opt": ["timeout:1", "attempts:1"]}

    def proxy_status(self, logs_only: bool = False) -> tuple[str, str]:
        """``(status, logs)`` of the proxy container (``logs_only``: one call, status "")."""
        errors = docker_errors()
        try:
            logs = bytes(self.proxy.logs(tail=30)).decode(errors="replace")
            if logs_only:
                return "", logs
            info = self.client.api.inspect_container(self.proxy.id)
        except errors.DockerException as e:
            return "unknown", str(e)
        return str((info.get("State") or {}).get("Status", "")), logs

    def remove(self) -> list[str]:
        """Remove the proxy container, the internal network and the directories; return problems."""
        import requests

        errors = docker_errors()
        problems: list[str] = []
        if self.proxy is not None:
            try:
                # A graceful stop first: the bundle flushes its last events (closed tunnels).
                with contextlib.suppress(errors.DockerException, requests.RequestException):
                    self.client.api.stop(self.proxy.id, timeout=2)
                force_remove(self.client, self.proxy.id)
            except errors.DockerException as e:
                problems.append(f"proxy container: {e}")
        elif self.needs_network:  # create may have happened without us learning the id
            with contextlib.suppress(errors.DockerException, requests.RequestException):
                for c in self.client.containers.list(
                    all=True, filters={"name": f"airlock-{self.sandbox_id}-proxy"}
                ):
                    force_remove(self.client, c.id)
        if self.network is not None:
            for attempt in range(20):
                try:
                    self.network.remove()
                    break
                except errors.NotFound:
                    break
                except errors.APIError as e:  # endpoints still detaching
                    if attempt == 19:
                        problems.append(f"network {self.network.name}: {e}")
                    time.sleep(0.05)
        return problems + self.remove_dirs()

    def remove_dirs(self) -> list[str]:
        """Remove the proxy's and the file credentials' directories; return problems."""
        problems = []
        for d in (self.proxy_dir, self.files_dir):
            try:
                if d.is_dir() and not d.is_symlink():
                    shutil.rmtree(d)
            except OSError as e:
                problems.append(f"{d}: {e}")
        return problems

    # -- async side -----------------------------------------------------------------------

    async def serve_events(self) -> None:
        """Listen on the proxy directory's event socket (before the proxy starts)."""
        path = self.proxy_dir / "events.sock"
        self._events_server = await asyncio.start_unix_server(self._on_events, path=str(path))
        os.chmod(path, 0o666)

    async def _on_events(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from airlock.proxy import PROXY_EVENT

        task = asyncio.current_task()
        assert task is not None
        self._event_tasks.add(task)
        try:
            while line := await reader.readline():
                text = redact(line.decode("utf-8", errors="replace"), self.credentials.secrets)
                try:
                    event = PROXY_EVENT.validate_json(text)
                except ValueError:
                    _log.warning("sandbox %s: malformed proxy event dropped", self.sandbox_id)
                    continue
                self.events_seen += 1
                _log.debug("sandbox %s egress: %s", self.sandbox_id, text.strip())
                if self.events is not None:
                    try:
                        await self.events(event)
                    except Exception:
                        _log.exception("event sink failed on a proxy event")
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()
            self._event_tasks.discard(task)

    async def wait_ready(self, timeout: float, poll: float = 0.02) -> None:  # noqa: ASYNC109
        """Wait until the bundle reports ready (unbound: that it waits for its configuration).

        Raises:
            EnvError: ``provision_failed`` with the proxy's last log lines.
        """
        line = _READY_LINE if self.bound else _WAITING_LINE
        deadline = time.monotonic() + timeout
        checked = time.monotonic()
        while True:
            # The status (a second call) only now and then: a dead proxy is rare.
            full = time.monotonic() - checked > 0.25 or time.monotonic() > deadline
            if full:
                checked = time.monotonic()
            status, logs = await asyncio.to_thread(self.proxy_status, not full)
            if line in logs:
                return
            if status in ("exited", "dead") or time.monotonic() > deadline:
                exited = status in ("exited", "dead")
                why = f"exited ({status})" if exited else f"not ready after {timeout:.0f}s"
                logs = redact(logs, self.credentials.secrets)
                raise EnvError.provision_failed(
                    f"egress proxy of sandbox {self.sandbox_id} {why}; last log lines:\n"
                    f"{logs.strip() or '(no output)'}"
                )
            await asyncio.sleep(poll)

    async def close_events(self, grace: float = 0.5) -> None:
        """Stop listening; let readers drain what the proxy already sent."""
        if self._events_server is not None:
            self._events_server.close()
            if self._event_tasks:
                await asyncio.wait(list(self._event_tasks), timeout=grace)
            for t in list(self._event_tasks):
                t.cancel()
            await asyncio.gather(*self._event_tasks, return_exceptions=True)
            self._events_server = None


def _ports(plan: SandboxPlan) -> dict[str, int]:
    """Each sidecar credential's port on the proxy."""
    return {c.name: CREDENTIAL_PORT_BASE + i for i, c in enumerate(plan.sidecars)}
