"""``airlock probe --serve-config``: the probe serves its agents itself, over real gRPC on
loopback, with a token it generates; the jobs go to that controller, which is gone after."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from airlock.cli import app
from airlock.jobs import ControllerClient
from airlock.probe import served
from airlock.probe.client import ProbeError, ProbeOptions, Row

AGENT = {"provider": {"kind": "command"}, "tools": ["bash"], "backend": "docker"}


def flat(text: str) -> str:
    """Terminal output with its line wrapping undone."""
    return " ".join(text.split())


def options() -> ProbeOptions:
    return ProbeOptions(
        controller="",
        token="",
        deny_agent="probe-deny",
        allow_agent="probe-allow",
        allowed_url="http://probe.test:8080/",
        canary="c4nary-value-long-enough",
        canary_header="x-airlock-probe",
        self_ip="10.244.0.7",
        targets={"node": "10.0.0.1:10250"},
    )


async def test_the_probe_submits_to_a_controller_it_serves_only_for_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "airlock.yaml"
    config.write_text(yaml.safe_dump({"version": 1, "agents": {"probe-deny": AGENT, "probe-allow": AGENT}}))
    seen: dict[str, object] = {}

    async def probe(opts: ProbeOptions) -> list[Row]:
        async with ControllerClient(opts.controller, opts.token) as client:
            seen["agents"] = sorted(str(a["name"]) for a in await client.agents())
        seen["opts"] = opts
        return [Row("any", "a check", "x", "x", True)]

    monkeypatch.setattr(served, "run_probe", probe)
    rows = await served.run_served_probe(options(), config)
    assert rows == [Row("any", "a check", "x", "x", True)]
    assert seen["agents"] == ["probe-allow", "probe-deny"]
    opts = seen["opts"]
    assert isinstance(opts, ProbeOptions)
    host, _, port = opts.controller.rpartition(":")
    assert host == "127.0.0.1" and len(opts.token) >= 32  # loopback only, a fresh token
    assert opts.targets == {"node": "10.0.0.1:10250", "probe's own controller": f"10.244.0.7:{port}"}
    with pytest.raises(OSError):  # stopped with the probe
        _, writer = await asyncio.open_connection("127.0.0.1", int(port))
        writer.close()


async def test_a_configuration_that_does_not_load_is_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "airlock.yaml"
    config.write_text("agents: {a: {provider: {kind: nope}}}\n")
    with pytest.raises(ProbeError) as e:
        await served.run_served_probe(options(), config)
    assert e.value.exit_code == 2 and "does not load" in str(e.value)


def test_the_cli_wants_exactly_one_controller_source(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    canary.write_text("c4nary-value-long-enough\n")
    base = [
        "probe",
        "--allowed-url",
        "http://x:8080/",
        "--self-ip",
        "127.0.0.1",
        "--canary-file",
        str(canary),
    ]
    runner = CliRunner()
    neither = runner.invoke(app, base)
    assert neither.exit_code == 2 and "give --serve-config" in flat(neither.output)
    both = runner.invoke(
        app, [*base, "--serve-config", str(tmp_path / "c.yaml"), "--controller", "127.0.0.1:9"]
    )
    assert both.exit_code == 2 and "not both" in flat(both.output)
    no_token = runner.invoke(app, [*base, "--controller", "127.0.0.1:9"])
    assert no_token.exit_code == 2 and "needs --token-file" in flat(no_token.output)
