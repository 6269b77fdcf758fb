"""Offline image builder pieces that need neither root nor Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.errors import ImageError
from airlock.images._builder import CONTROLLER, RUNNER, _changes, controller_image_tag, runner_image_tag
from airlock.images._rootfs import glibc_version, parse_print_uris, python_version
from airlock.images._wheels import WheelTarget, find_source_tree, runner_requirements, source_digest

URIS = "\n".join(
    [
        "'http://d/libc6.deb' libc6_2.36-9+deb12u14_amd64.deb 2759320 MD5Sum:8d",
        "'http://d/z.deb' zlib1g_1%3a1.2.13.dfsg-1_amd64.deb 86684 MD5Sum:ec",
        "'http://s/py.deb' python3.11_3.11.2-6+deb12u9_amd64.deb 575032 SHA256:ab",
    ]
)


def test_parse_print_uris() -> None:
    debs = parse_print_uris(URIS)
    assert [d.name for d in debs] == ["libc6", "python3.11", "zlib1g"]
    zlib = debs[2]
    assert zlib.version == "1:1.2.13.dfsg-1" and zlib.apt_ref == "zlib1g:amd64=1:1.2.13.dfsg-1"
    assert zlib.size == 86684
    assert python_version(debs) == "3.11"
    assert glibc_version(debs) == (2, 36)
    with pytest.raises(ImageError):
        parse_print_uris("E: Unable to locate package nothing")


def test_wheel_target_selects_image_platform() -> None:
    args = WheelTarget("3.11", (2, 36), "amd64").pip_args()
    assert "--only-binary=:all:" in args
    assert args[args.index("--python-version") + 1] == "3.11"
    assert "manylinux_2_36_x86_64" in args and "manylinux_2_17_x86_64" in args
    assert "manylinux2014_x86_64" in args and "cp311" in args
    assert "manylinux_2_17_aarch64" in WheelTarget("3.11", (2, 36), "arm64").pip_args()
    with pytest.raises(ImageError, match="unsupported architecture"):
        WheelTarget("3.11", (2, 36), "mips").pip_args()


def test_runner_requirements_exclude_controller_packages() -> None:
    reqs = runner_requirements(find_source_tree())
    names = " ".join(reqs)
    assert "grpcio" in names and "pydantic" in names and "anthropic" in names
    assert not any(r.startswith(("docker", "typer", "rich")) for r in reqs)


def test_source_digest_tracks_sources(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    (tmp_path / "airlock").mkdir()
    (tmp_path / "layer0").mkdir()
    (tmp_path / "airlock" / "a.py").write_text("x = 1\n")
    first = source_digest(tmp_path)
    (tmp_path / "airlock" / "__pycache__").mkdir()
    (tmp_path / "airlock" / "__pycache__" / "a.pyc").write_bytes(b"junk")
    assert source_digest(tmp_path) == first
    (tmp_path / "airlock" / "a.py").write_text("x = 2\n")
    assert source_digest(tmp_path) != first
    with pytest.raises(ImageError, match="source tree"):
        find_source_tree(tmp_path / "nowhere")


def test_image_changes() -> None:
    changes = _changes(RUNNER, {"airlock.version": "0.1.0"})
    assert "USER 65534:65534" in changes and "WORKDIR /workspace" in changes
    assert 'ENTRYPOINT ["/opt/venv/bin/python", "-m", "airlock.runner"]' in changes
    assert not any(c.startswith("CMD") for c in changes)
    assert any(c.startswith("ENV PATH=/opt/venv/bin:") for c in changes)
    assert 'LABEL airlock.version="0.1.0"' in changes
    assert runner_image_tag("9.9") == "airlock-runner:9.9"
    controller = _changes(CONTROLLER, {})
    assert "USER 65534:65534" in controller and 'ENTRYPOINT ["/opt/venv/bin/airlock"]' in controller
    assert 'CMD ["serve"]' in controller
    assert controller_image_tag("9.9") == "airlock-controller:9.9"
    assert CONTROLLER.extras == ("providers", "mcp", "controller") and RUNNER.forbidden_modules
