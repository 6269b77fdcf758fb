"""Files in and out of a real runner's workspace over gRPC: confined paths, no link followed,
no special file read, caps refusing the whole set."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from airlock.policy import FileRefused, FilesOverCap
from airlock.runner import RemoteTurn
from airlock.spec import AgentSpec, ArtifactSpec
from layer0 import TurnInput

from .runner_helpers import scripted_spec, text_step, tool_step


def remote(address: str, token: str, artifacts: ArtifactSpec | None = None, **spec: object) -> RemoteTurn:
    agent = scripted_spec([text_step("done")], **spec)
    if artifacts is not None:
        agent = agent.model_copy(update={"artifacts": artifacts})
    return RemoteTurn(address, token, agent)


async def test_input_files_land_in_the_workspace_and_a_tool_reads_them(
    address: str, token: str, workspace: Path
) -> None:
    agent = scripted_spec(
        [tool_step("read_file", {"path": "data/in.txt"}), text_step("read it")], tools=["read_file"]
    )
    async with RemoteTurn(address, token, agent) as turn:
        await turn.put_files(
            [("data/in.txt", b"hello from the host\n"), ("empty", b""), ("big", b"x" * 3_000_000)]
        )
        events: list[object] = []

        async def sink(event: object) -> None:
            events.append(event)

        await turn.execute(TurnInput.new("go"), events=sink)
    assert (workspace / "data/in.txt").read_bytes() == b"hello from the host\n"
    assert (workspace / "empty").read_bytes() == b""
    assert (workspace / "big").stat().st_size == 3_000_000
    finished = [e for e in events if getattr(e, "type", "") == "tool_finished"]
    assert "hello from the host" in finished[0].output  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", "", "a\\b"])
async def test_a_path_leaving_the_workspace_is_refused_before_it_is_sent(
    address: str, token: str, workspace: Path, path: str
) -> None:
    async with remote(address, token) as turn:
        with pytest.raises(FileRefused):
            await turn.put_files([(path, b"x")])
    assert not (workspace.parent / "escape").exists()


async def test_a_symlink_in_the_way_of_an_input_file_is_refused_and_nothing_is_written(
    address: str, token: str, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    (workspace / "file-link").symlink_to(outside / "target")
    async with remote(address, token) as turn:
        with pytest.raises(FileRefused, match="link"):
            await turn.put_files([("link/planted", b"x")])
        with pytest.raises(FileRefused, match="link"):
            await turn.put_files([("file-link", b"x")])
    assert os.listdir(outside) == []


async def test_input_files_over_the_cap_are_refused_whole(address: str, token: str, workspace: Path) -> None:
    async with remote(address, token) as turn:
        with pytest.raises(FileRefused, match="8388608 bytes"):
            await turn.put_files([("a", b"x" * 5_000_000), ("b", b"y" * 5_000_000)])
    assert os.listdir(workspace) == []


async def test_artifacts_under_the_globs_come_back_and_nothing_else(
    address: str, token: str, workspace: Path
) -> None:
    (workspace / "out/sub").mkdir(parents=True)
    (workspace / "out/report.md").write_text("# report\n")
    (workspace / "out/sub/data.bin").write_bytes(bytes(range(256)) * 10_000)
    (workspace / "notes.txt").write_text("not an artifact")
    async with remote(address, token) as turn:
        found = await turn.collect_artifacts()
    assert list(found.files) == ["out/report.md", "out/sub/data.bin"]
    assert found.files["out/sub/data.bin"] == bytes(range(256)) * 10_000
    assert found.skipped == []


async def test_links_and_fifos_under_the_globs_are_skipped_never_followed(
    address: str, token: str, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    (workspace / "out").mkdir()
    (workspace / "out/leak").symlink_to(secret)
    (workspace / "out/dir-leak").symlink_to(tmp_path)
    os.mkfifo(workspace / "out/pipe")
    (workspace / "out/ok.txt").write_text("fine")
    async with remote(address, token) as turn:
        found = await turn.collect_artifacts()
    assert found.files == {"out/ok.txt": b"fine"}
    assert dict(found.skipped) == {
        "out/dir-leak": "a symbolic link (never followed)",
        "out/leak": "a symbolic link (never followed)",
        "out/pipe": "not a regular file",
    }
    # On the wire each skipped file also says why as a SkipReason.
    async with grpc.aio.insecure_channel(address) as channel:
        call = pb_grpc.RunnerStub(channel).CollectArtifacts(
            pb.CollectArtifactsRequest(globs=["out/**"]), metadata=(("authorization", f"Bearer {token}"),)
        )
        kinds = {i.skipped.path: i.skipped.kind async for i in call if i.HasField("skipped")}
    assert kinds == {
        "out/dir-leak": pb.SKIP_REASON_SYMLINK,
        "out/leak": pb.SKIP_REASON_SYMLINK,
        "out/pipe": pb.SKIP_REASON_NOT_REGULAR_FILE,
    }


@pytest.mark.parametrize(
    ("caps", "message"),
    [
        ({"max_files": 2}, "3 files, more than the cap of 2"),
        ({"max_file_bytes": 10}, "has 11 bytes, more than the cap of 10 bytes a file"),
        ({"max_total_bytes": 20}, "23 bytes in all, more than the cap of 20 bytes"),
    ],
)
async def test_artifacts_over_a_cap_are_refused_whole_with_the_cap_named(
    address: str, token: str, workspace: Path, caps: dict[str, int], message: str
) -> None:
    (workspace / "out").mkdir()
    for name, size in (("a", 11), ("b", 6), ("c", 6)):
        (workspace / "out" / name).write_bytes(b"z" * size)
    async with remote(address, token, ArtifactSpec(**caps)) as turn:  # type: ignore[arg-type]
        with pytest.raises(FilesOverCap, match=message):
            await turn.collect_artifacts()


def test_the_spec_refuses_globs_leaving_the_workspace() -> None:
    for glob in ("../x", "/abs/**", "a/../../b"):
        with pytest.raises(ValueError, match="relative to the workspace"):
            AgentSpec(name="a", provider={"kind": "scripted"}, artifacts={"globs": [glob]})  # type: ignore[arg-type]
