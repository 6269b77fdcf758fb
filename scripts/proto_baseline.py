#!/usr/bin/env python3
"""The descriptor baseline: airlock's protos compared against ``protos/baseline/descriptors.json``.

The baseline is a readable JSON summary of every message (fields: number, type, label), enum
(values) and service (RPCs: request, response, streaming) with their reserved numbers. Against it:

- a **violation** of "never reuse a number" is refused always, even by ``--update``: a field or
  enum value number reused with another name, type or label; a reserved number used again; a
  field or enum value removed without reserving its number;
- a **breaking change** fails the test until the baseline is updated on purpose: a removed
  message, enum, field, enum value, service or RPC (numbers reserved), a changed request or
  response type or streaming;
- additions pass.

Usage::

    python scripts/proto_baseline.py            # check; exit 1 with the list on a breaking change
    python scripts/proto_baseline.py --update   # accept the current protos as the new baseline
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
BASELINE = PROTO_ROOT / "baseline" / "descriptors.json"
UPDATE = "python scripts/proto_baseline.py --update"


def descriptor_set() -> Any:
    """A fresh FileDescriptorSet of ``protos/airlock/`` (protoc from grpcio-tools)."""
    import grpc_tools
    from google.protobuf import descriptor_pb2

    sys.path.insert(0, str(ROOT / "scripts"))
    from gen_protos import googleapis_include

    protos = sorted(p.relative_to(PROTO_ROOT).as_posix() for p in (PROTO_ROOT / "airlock").rglob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.binpb"
        include = Path(grpc_tools.__file__).parent / "_proto"
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{include}"]
        cmd += [f"-I{googleapis_include()}", f"--descriptor_set_out={out}", *protos]
        subprocess.run(cmd, check=True, cwd=PROTO_ROOT)
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _ranges(reserved: Any) -> list[list[int]]:
    return [[r.start, r.end] for r in reserved]


def _messages(prefix: str, messages: Any, into: dict[str, Any]) -> None:
    from google.protobuf import descriptor_pb2 as d

    for m in messages:
        name = f"{prefix}.{m.name}"
        fields = {
            str(f.number): {
                "name": f.name,
                "type": d.FieldDescriptorProto.Type.Name(f.type),
                "type_name": f.type_name,
                "label": d.FieldDescriptorProto.Label.Name(f.label),
            }
            for f in m.field
        }
        # Message reserved ranges are half-open [start, end).
        into["messages"][name] = {
            "fields": fields,
            "reserved": [[a, b - 1] for a, b in _ranges(m.reserved_range)],
        }
        for e in m.enum_type:
            _enum(f"{name}.{e.name}", e, into)
        _messages(name, m.nested_type, into)


def _enum(name: str, e: Any, into: dict[str, Any]) -> None:
    values = {str(v.number): v.name for v in e.value}
    into["enums"][name] = {"values": values, "reserved": _ranges(e.reserved_range)}  # closed ranges


def summary(fds: Any) -> dict[str, Any]:
    """The JSON summary of a FileDescriptorSet (keys sorted when written)."""
    out: dict[str, Any] = {"messages": {}, "enums": {}, "services": {}}
    for f in fds.file:
        prefix = f".{f.package}" if f.package else ""
        _messages(prefix, f.message_type, out)
        for e in f.enum_type:
            _enum(f"{prefix}.{e.name}", e, out)
        for s in f.service:
            out["services"][f"{prefix}.{s.name}"] = {
                m.name: {
                    "input": m.input_type,
                    "output": m.output_type,
                    "client_streaming": m.client_streaming,
                    "server_streaming": m.server_streaming,
                }
                for m in s.method
            }
    return out


def _reserved(number: int, ranges: list[list[int]]) -> bool:
    return any(a <= number <= b for a, b in ranges)


def _numbered(
    kind: str, name: str, old: dict[str, Any], new: dict[str, Any], items: str
) -> tuple[list[str], list[str]]:
    """(violations, breaking) for the numbered members (fields or values) of one message or enum."""
    violations: list[str] = []
    breaking: list[str] = []
    for number, was in old[items].items():
        now = new[items].get(number)
        if now is None:
            if _reserved(int(number), new["reserved"]):
                breaking.append(f"{kind} {name}: {number} ({was}) removed (reserved)")
            else:
                violations.append(f"{kind} {name}: {number} ({was}) removed without `reserved {number};`")
        elif now != was:
            violations.append(f"{kind} {name}: number {number} reused: was {was}, now {now}")
    for number in new[items]:
        if number not in old[items] and _reserved(int(number), old["reserved"]):
            violations.append(f"{kind} {name}: reserved number {number} used again")
    return violations, breaking


def compare(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(violations of the numbering rule, other breaking changes) from ``old`` to ``new``."""
    violations: list[str] = []
    breaking: list[str] = []
    for kind, items in (("messages", "fields"), ("enums", "values")):
        for name, was in old[kind].items():
            now = new[kind].get(name)
            if now is None:
                breaking.append(f"{kind[:-1]} {name} removed")
                continue
            v, b = _numbered(kind[:-1], name, was, now, items)
            violations += v
            breaking += b
    for name, methods in old["services"].items():
        now = new["services"].get(name)
        if now is None:
            breaking.append(f"service {name} removed")
            continue
        for method, was in methods.items():
            if method not in now:
                breaking.append(f"rpc {name}.{method} removed")
            elif now[method] != was:
                breaking.append(f"rpc {name}.{method} changed: was {was}, now {now[method]}")
    return violations, breaking


def write(summary_: dict[str, Any], path: Path = BASELINE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary_, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--update", action="store_true", help="accept the current protos as the baseline")
    args = parser.parse_args()
    current = summary(descriptor_set())
    old = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else None
    violations, breaking = compare(old, current) if old is not None else ([], [])
    for line in violations:
        print(f"VIOLATION (never reuse a number; not accepted by --update): {line}")
    for line in breaking:
        print(f"breaking: {line}")
    if violations:
        return 1
    if args.update:
        write(current)
        print(f"baseline written: {BASELINE.relative_to(ROOT)}")
        return 0
    if breaking:
        print(f"breaking changes: if they are deliberate, run `{UPDATE}` and commit the baseline")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
