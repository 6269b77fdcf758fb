#!/usr/bin/env python3
"""Generate the private gRPC package ``airlock/_proto/`` from ``protos/``.

Runs ``grpcio-tools`` (protoc) with the ``mypy-protobuf`` plugins on ``protos/airlock/``, then
rewrites the generated imports from the proto package path (``airlock.runner.v1``, which would
collide with the real ``airlock.runner`` package) to ``airlock._proto.runner.v1``.

``protos/grpc/`` (the vendored standard health service) is NOT generated: in Python it is
served by ``grpcio-health-checking``, whose module already registers those messages, and a
second copy in the descriptor pool would clash. It is there for clients in other languages.

Usage::

    python scripts/gen_protos.py            # regenerate airlock/_proto/ in place
    python scripts/gen_protos.py --out DIR  # write the package into DIR instead (CI diff check)

The output is committed; ``tests/unit/runner/test_runner_protos_generated.py`` regenerates into a
temporary directory and fails on any difference.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
#: Only airlock's own protos are generated (see the module docstring for protos/grpc/).
GENERATED_ROOT = PROTO_ROOT / "airlock"
DEFAULT_OUT = ROOT / "airlock" / "_proto"

#: The proto package prefix ``airlock.`` is dropped inside ``airlock/_proto/``.
_STRIP = "airlock/"

README = """\
# airlock/_proto — GENERATED, DO NOT EDIT

Python code generated from `protos/airlock/` by `scripts/gen_protos.py` (grpcio-tools +
mypy-protobuf).
Edit the `.proto` files and run `python scripts/gen_protos.py` instead.

This package is private: only `airlock/wire/` (the shared layer0 <-> protobuf converters) and
the packages serving and calling the two services, `airlock/runner/` and `airlock/controller/`
(which also converts its job messages), touch its types. ruff and mypy skip it; a test
regenerates it and fails on any difference.
"""


def _rewrite(text: str) -> str:
    """Point imports of generated modules at ``airlock._proto``."""
    # `from airlock.runner.v1 import runner_pb2 as ...` and `import airlock.runner.v1.runner_pb2`
    text = re.sub(r"^(\s*)from airlock\.(\w+)\.", r"\1from airlock._proto.\2.", text, flags=re.M)
    text = re.sub(r"^(\s*)import airlock\.(\w+)\.", r"\1import airlock._proto.\2.", text, flags=re.M)
    # The module name handed to the descriptor builder (sets __module__ of message classes).
    text = re.sub(r"'airlock\.(\w+)\.(\w+)\.(\w+_pb2)'", r"'airlock._proto.\1.\2.\3'", text)
    # Type references in the .pyi stubs.
    text = re.sub(r"\bairlock\.(runner|controller)\.v1\.(\w+_pb2)\b", r"airlock._proto.\1.v1.\2", text)
    return text


def generate(out: Path) -> list[Path]:
    """Generate the package into ``out`` (created; existing generated files replaced)."""
    import grpc_tools

    protos = sorted(GENERATED_ROOT.rglob("*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {GENERATED_ROOT}")
    include = Path(grpc_tools.__file__).parent / "_proto"
    # google/api/field_behavior.proto (googleapis-common-protos, beside its generated modules).
    api_spec = importlib.util.find_spec("google.api.field_behavior_pb2")
    if api_spec is None or api_spec.origin is None:
        raise SystemExit("googleapis-common-protos is missing (google/api/field_behavior.proto)")
    api_include = Path(api_spec.origin).parents[2]
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"-I{api_include}",
            f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
            f"--python_out={raw}",
            f"--grpc_python_out={raw}",
            f"--mypy_out={raw}",
            f"--mypy_grpc_out={raw}",
            *(str(p.relative_to(PROTO_ROOT)) for p in protos),
        ]
        subprocess.run(cmd, check=True, cwd=PROTO_ROOT)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        written: list[Path] = []
        for src in sorted(raw.rglob("*")):
            if not src.is_file():
                continue
            rel = src.relative_to(raw).as_posix()
            if rel.startswith(_STRIP):
                rel = rel[len(_STRIP) :]
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(_rewrite(src.read_text(encoding="utf-8")), encoding="utf-8")
            written.append(dest)
    # Packages: an __init__.py in every directory.
    for directory in [out, *sorted(p for p in out.rglob("*") if p.is_dir())]:
        init = directory / "__init__.py"
        if not init.exists():
            init.write_text('"""Generated by scripts/gen_protos.py; do not edit."""\n', encoding="utf-8")
            written.append(init)
    (out / "README.md").write_text(README, encoding="utf-8")
    written.append(out / "README.md")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output package directory")
    args = parser.parse_args()
    written = generate(args.out)
    print(f"generated {len(written)} files into {args.out}")


if __name__ == "__main__":
    main()
