"""Secrets, for all three injection kinds at once, from inside a real sandbox: where each
kind is visible by design (the env var and the 0400 file in the sandbox, the env var in the
engine's own container config), and where none may ever be — the sidecar key anywhere in the
sandbox (environment, every process's /proc environ and cmdline, files), in the credential
proxy's reply although the upstream echoes it, in either container's inspect or logs, in the
turn's output and events, or in the controller's log records.

The upstream is a reflecting server this test starts on the host's address on the egress
network; the sandbox reaches it only through the sidecar's credential proxy.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from airlock.policy.plan import SidecarRoute
from airlock.sandbox.docker import DockerEnvironment
from airlock.turn import ToolStarted
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvironmentSpec,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
)
from tests.support.containers import OWNER
from tests.support.echo import ReflectingUpstream, reflecting_upstream
from tests.support.hostile import Hostile, run_hostile_async

pytestmark = [pytest.mark.docker, pytest.mark.attack("secrets")]

SECRET_FILE = "/run/secrets/deploy-key"
#: Inside the sandbox: the env var and the file as hex (so no redaction hides them from the
#: test), and the file's mode and owner.
SHOW_PLACED = (
    "printf %s \"$API_TOKEN\" | od -An -tx1 | tr -d ' \\n'; echo; "
    f"od -An -tx1 {SECRET_FILE} | tr -d ' \\n'; echo; stat -c '%a %u' {SECRET_FILE}; "
    'printf %s "$API_TOKEN"; echo; cat ' + SECRET_FILE
)


@dataclass
class Seen:
    hostile: Hostile
    values: dict[str, str]
    upstream_heads: list[bytes]
    inspected: dict[str, str] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)

    @property
    def sidecar(self) -> str:
        return self.values["SIDE_KEY"]

    def kinds(self) -> dict[str, str]:
        return {"env_var": self.values["ENV_TOKEN"], "file": self.values["FILE_KEY"], "sidecar": self.sidecar}


def forms(value: str) -> list[str]:
    """The forms an echo or a log would carry a secret in."""
    from urllib.parse import quote

    escaped = json.dumps(value)[1:-1]
    return sorted({value, escaped, escaped.replace("/", "\\/"), quote(value, safe="")})


async def _seen(boundary: str, image: str) -> Seen:
    values = {
        "ENV_TOKEN": "tok-" + secrets.token_hex(16),
        "FILE_KEY": "key/" + secrets.token_hex(16),
        "SIDE_KEY": "sk-side/" + secrets.token_hex(16),
    }
    probe_env = DockerEnvironment(image=image, sweep=False)
    gateway = await probe_env.host_address()
    async with reflecting_upstream(gateway) as echo:
        return await _attack(boundary, image, values, gateway, echo)


async def _attack(
    boundary: str, image: str, values: dict[str, str], gateway: str, echo: ReflectingUpstream
) -> Seen:
    import docker

    client = docker.from_env()
    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination=f"{gateway}/32", port=echo.port, action=NetworkAction.ALLOW)],
        ),
        credentials=[
            CredentialRef(name="api-token", injection=CredentialInjection.env_var("API_TOKEN")),
            CredentialRef(name="deploy-key", injection=CredentialInjection.file(SECRET_FILE)),
            CredentialRef(name="side-key", injection=CredentialInjection.sidecar()),
        ],
    )
    names = {"api-token": "ENV_TOKEN", "deploy-key": "FILE_KEY", "side-key": "SIDE_KEY"}
    digest = hashlib.sha256(values["SIDE_KEY"].encode()).hexdigest()
    scan = {
        "credential": {"port": 8081, "path": "/json"},
        "canary_sha256": digest,
        "scan_roots": ["/run", "/tmp", "/workspace", "/etc", "/home", "/root", "/var", "/dev/shm"],
    }
    inspected: dict[str, str] = {}
    logs: dict[str, str] = {}

    async def watch(event: Any) -> None:
        # At the last tool call both containers live and have logged everything before it.
        if (
            isinstance(event, ToolStarted)
            and event.name == "bash"
            and "final-look" in json.dumps(event.input)
        ):

            def look() -> None:
                for c in client.containers.list(filters={"label": f"airlock.owner={OWNER}"}):
                    role = c.labels.get("airlock.role", "sandbox")
                    inspected[role] = json.dumps(client.api.inspect_container(c.id))
                    logs[role] = bytes(c.logs()).decode(errors="replace")

            await asyncio.to_thread(look)

    hostile = await run_hostile_async(
        [
            f"/opt/venv/bin/python -m airlock.probe.sandbox '{json.dumps(scan)}'",
            SHOW_PLACED,
            "echo final-look",
        ],
        isolation=boundary,
        image=image,
        spec=spec,
        secrets={name.upper().replace("-", "_"): values[var] for name, var in names.items()},
        watch=watch,
        run_options={
            "sidecar_routes": {
                "side-key": SidecarRoute(
                    upstream=f"http://{gateway}:{echo.port}", header="authorization", value_prefix="Bearer "
                )
            }
        },
    )
    client.close()
    return Seen(hostile, values, list(echo.heads), inspected, logs)


@pytest.fixture(scope="module")
def seen(boundary: str, runner_image: str) -> Iterator[Seen]:
    yield asyncio.run(_seen(boundary, runner_image))


def test_the_turn_ran(seen: Seen) -> None:
    assert seen.hostile.error is None, seen.hostile.error
    assert seen.hostile.output is not None and seen.hostile.output.exit_reason.kind == "complete"


def test_sidecar_key_reaches_the_upstream_only(seen: Seen) -> None:
    assert any(f"authorization: Bearer {seen.sidecar}".encode() in h for h in seen.upstream_heads)
    report = seen.hostile.json(0)
    assert report["credential"]["status"] == 200


def test_sidecar_key_nowhere_in_the_sandbox_nor_in_the_echo(seen: Seen) -> None:
    # environment, every /proc/<pid>/{environ,cmdline}, files under the roots, the echoed reply
    assert seen.hostile.json(0)["canary_found_in"] == []


def test_env_var_and_file_placed_as_documented(seen: Seen) -> None:
    lines = seen.hostile.results[1]["stdout"].split("\n")
    assert bytes.fromhex(lines[0]).decode() == seen.values["ENV_TOKEN"]
    assert bytes.fromhex(lines[1]).decode() == seen.values["FILE_KEY"]
    assert lines[2].split()[0] == "400"


@pytest.mark.parametrize("kind", ["env_var", "file", "sidecar"])
def test_not_in_output_or_events(seen: Seen, kind: str) -> None:
    secret = seen.kinds()[kind]
    text = seen.hostile.everything()
    assert not [f for f in forms(secret) if f in text]
    assert "[REDACTED]" in seen.hostile.results[1]["stdout"]  # the plain prints were masked


@pytest.mark.parametrize("kind", ["env_var", "file", "sidecar"])
def test_not_in_container_logs(seen: Seen, kind: str) -> None:
    assert set(seen.logs) == {"sandbox", "proxy"}
    secret = seen.kinds()[kind]
    assert not [(role, f) for role, text in seen.logs.items() for f in forms(secret) if f in text]


@pytest.mark.parametrize("kind", ["env_var", "file", "sidecar"])
def test_not_in_controller_logs(seen: Seen, kind: str) -> None:
    secret = seen.kinds()[kind]
    assert seen.hostile.logs  # records were captured
    assert not [f for f in forms(secret) if f in seen.hostile.logs]


def test_inspect_holds_only_the_env_var_of_the_sandbox(seen: Seen) -> None:
    # docker inspect needs the engine's API (root on the host), never reachable from a sandbox;
    # an env_var credential is, by its nature, in the sandbox container's configuration.
    assert seen.values["ENV_TOKEN"] in seen.inspected["sandbox"]
    assert seen.values["ENV_TOKEN"] not in seen.inspected["proxy"]
    for kind in ("file", "sidecar"):
        secret = seen.kinds()[kind]
        assert not [r for r, text in seen.inspected.items() for f in forms(secret) if f in text], kind
