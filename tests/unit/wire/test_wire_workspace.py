"""Workspace events and options round-trip through the wire; bad values are refused."""

from __future__ import annotations

import pytest

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.policy import (
    EMPTY_MANIFEST,
    ManifestEntry,
    SkippedFile,
    WorkspaceBlob,
    WorkspaceSnapshot,
    WorkspaceStopped,
    sha256_hex,
)

SHA = sha256_hex(b"x")
EVENTS = [
    WorkspaceBlob(sha256=SHA, size=1, compression="zlib", data=b"\x78\x9c", last=False),
    WorkspaceBlob(sha256=SHA, size=1, compression="none", data=b"x", last=True),
    WorkspaceSnapshot(
        seq=3,
        base=EMPTY_MANIFEST.digest,
        manifest="sha256:" + "1" * 64,
        changed=(ManifestEntry(path="a/b", sha256=SHA, size=1, executable=True),),
        deleted=("old",),
        skipped=(SkippedFile(path="link", reason="a symbolic link (never followed)"),),
        total_bytes=1,
        files=1,
    ),
    WorkspaceStopped(reason="too big", bytes=10, max_bytes=5),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)
def test_workspace_events_round_trip(event: object) -> None:
    message = wire.event_to_proto(event, payload_limit=0)  # type: ignore[arg-type]
    assert message is not None
    again = pb.TurnEvent.FromString(message.SerializeToString())
    assert wire.event_from_proto(again) == event


def test_an_unknown_compression_or_bad_hash_is_malformed() -> None:
    with pytest.raises(wire.MalformedMessage, match="compression"):
        wire.event_from_proto(pb.TurnEvent(workspace_blob=pb.WorkspaceBlob(sha256=SHA, size=1)))
    with pytest.raises(wire.MalformedMessage):
        wire.event_from_proto(
            pb.TurnEvent(
                workspace_blob=pb.WorkspaceBlob(sha256="nope", size=1, compression=pb.COMPRESSION_ZLIB)
            )
        )
    with pytest.raises(wire.MalformedMessage):
        wire.event_from_proto(pb.TurnEvent(workspace=pb.WorkspaceSnapshot(base="x", manifest="y")))


def test_options_round_trip_and_absent_means_off() -> None:
    options = wire.WorkspaceOptions(max_bytes=123, base=EMPTY_MANIFEST.digest)
    request = pb.ExecuteRequest(workspace=wire.options_to_proto(options))
    assert wire.options_from_proto(pb.ExecuteRequest.FromString(request.SerializeToString())) == options
    assert wire.options_from_proto(pb.ExecuteRequest()) is None
    assert wire.options_from_proto(pb.ExecuteRequest(workspace=pb.WorkspaceOptions(max_bytes=5))) is None
    with pytest.raises(wire.MalformedMessage, match="max_bytes"):
        wire.options_from_proto(
            pb.ExecuteRequest(workspace=pb.WorkspaceOptions(snapshots=True, max_bytes=-1))
        )


def test_sandbox_events_accept_workspace_events() -> None:
    from pydantic import TypeAdapter

    from airlock.sandbox import SandboxEvent

    adapter: TypeAdapter[object] = TypeAdapter(SandboxEvent)
    for event in EVENTS:
        assert adapter.validate_python(event.model_dump()) == event
