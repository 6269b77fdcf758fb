"""The image's bytecode commands: compile as unchecked-hash pycs, and the check that refuses
any module imported from source or from another kind of pyc (run here with this Python)."""

from __future__ import annotations

import py_compile
import subprocess
import sys
from pathlib import Path

from airlock.images._bytecode import UNCHECKED_HASH_FLAGS, check_argv, compile_argv

MODES = {
    "with_hash": py_compile.PycInvalidationMode.UNCHECKED_HASH,
    "with_timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
    "with_checked_hash": py_compile.PycInvalidationMode.CHECKED_HASH,
}


def test_compile_argv_forces_unchecked_hash_pycs() -> None:
    argv = compile_argv("/usr/lib/python3.11", python="/opt/venv/bin/python")
    assert argv[:3] == ["/opt/venv/bin/python", "-m", "compileall"]
    assert "-f" in argv and argv[argv.index("--invalidation-mode") + 1] == "unchecked-hash"
    assert argv[-1] == "/usr/lib/python3.11"
    assert compile_argv("/x")[0] == "python3"


def refused(tmp_path: Path, module: str) -> set[str]:
    """The modules the check names after importing ``module`` from ``tmp_path``."""
    argv = check_argv(module, sys.executable)
    assert argv[1] == "-B" and argv[-1] == str(UNCHECKED_HASH_FLAGS)
    # -S: this venv's .pth files would import modules that have nothing to do with the test.
    result = subprocess.run(
        [argv[0], "-S", *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(tmp_path)},
    )
    _, _, names = result.stderr.strip().rpartition("modules without an unchecked-hash pyc: ")
    return set(names.split(", ")) if result.returncode else set()


def test_the_check_names_modules_without_an_unchecked_hash_pyc(tmp_path: Path) -> None:
    for name, mode in MODES.items():
        source = tmp_path / f"{name}.py"
        source.write_text("VALUE = 1\n")
        py_compile.compile(str(source), invalidation_mode=mode, doraise=True)
    (tmp_path / "without_pyc.py").write_text("VALUE = 1\n")
    assert "with_hash" not in refused(tmp_path, "with_hash")
    for name in ("with_timestamp", "with_checked_hash", "without_pyc"):
        assert name in refused(tmp_path, name), name
    assert not list(tmp_path.glob("__pycache__/without_pyc*")), "the check wrote bytecode"
