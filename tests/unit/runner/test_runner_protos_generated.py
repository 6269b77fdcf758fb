"""The committed ``airlock/_proto/`` is exactly what ``scripts/gen_protos.py`` generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "airlock" / "_proto"


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_regenerating_the_protos_gives_no_diff(tmp_path: Path) -> None:
    out = tmp_path / "_proto"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    fresh, committed = _files(out), _files(COMMITTED)
    assert sorted(fresh) == sorted(committed), "generated file set differs: run scripts/gen_protos.py"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated code in airlock/_proto ({stale}): run scripts/gen_protos.py"


def test_generated_imports_point_into_the_private_package() -> None:
    for name, text in _files(COMMITTED).items():
        if name.endswith((".py", ".pyi")):
            assert b"from airlock.runner" not in text and b"import airlock.runner" not in text, name
