"""Package surface: exports, import footprint (no Docker), TLS channel."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import airlock.runner as runner_pkg
from airlock.runner import RemoteTurn, RunnerConfig, RunnerServer, TlsFiles
from layer0 import Turn, TurnError, TurnInput

from .runner_helpers import scripted_spec, text_step


def test_exports_match_all() -> None:
    public = {n for n in dir(runner_pkg) if not n.startswith("_")}
    assert set(runner_pkg.__all__) <= public
    assert {"RemoteTurn", "RunnerServer", "RunnerConfig", "RunnerEvent", "TurnFinished"} <= set(
        runner_pkg.__all__
    )


def test_remote_turn_is_a_layer0_turn() -> None:
    turn = RemoteTurn("127.0.0.1:1", "t" * 20, scripted_spec([text_step("x")]))
    assert isinstance(turn, Turn)
    assert turn.spec.name == "tester"
    assert "t" * 20 not in repr(turn)


def test_importing_the_runner_never_imports_docker_or_provider_sdks() -> None:
    code = (
        "import sys, airlock.runner, airlock.runner.__main__; "
        "bad = [m for m in ('docker', 'anthropic', 'openai', 'kubernetes') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=runner.test",
            "-addext", "subjectAltName=DNS:runner.test,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI needed to make a test certificate")
async def test_tls_channel(tmp_path: Path, token: str, workspace: Path) -> None:
    cert, key = _self_signed(tmp_path)
    async with RunnerServer(RunnerConfig(token=token, workspace=workspace)) as server:
        address = await server.start("127.0.0.1:0", tls=TlsFiles(cert=cert, key=key))
        spec = scripted_spec([text_step("over tls")])
        async with RemoteTurn(address, token, spec, root_certificates=cert.read_bytes()) as turn:
            assert (await turn.execute(TurnInput.new("hi"))).message.as_text() == "over tls"
        # A plaintext client cannot talk to the TLS port.
        async with RemoteTurn(address, token, spec) as plain:
            with pytest.raises(TurnError) as e:
                await plain.execute(TurnInput.new("hi"))
        assert e.value.kind == "retryable"
