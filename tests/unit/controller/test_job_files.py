"""A job's files end to end on real runner processes: input files placed in the workspace
before the turn, artifacts collected after it and kept in the job store, through the service
and through the gRPC API; paths leaving the workspace, links, and sets over a cap refused
with a clear message, never cut."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, SqliteJobStore
from airlock.jobs import ControllerClient, ControllerError, JobState, LogLine, SandboxActivity
from airlock.policy import FileRefused, FilesOverCap
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step
from airlock.turn import ToolFinished
from layer0 import TurnInput

pytestmark = pytest.mark.timeout(90)


def agent(steps: list[Any], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


CONFIG = {
    "version": 1,
    "agents": {
        # reads the input file, writes its upper-cased text as an artifact
        "upper": agent(
            [
                tool_step("read_file", {"path": "data/in.txt"}, id="r"),
                tool_step(
                    "write_file", {"path": "out/upper.txt", "content": "HELLO FROM THE HOST\n"}, id="w"
                ),
                tool_step("write_file", {"path": "scratch.txt", "content": "not an artifact"}, id="s"),
                text_step("done"),
            ],
            ["read_file", "write_file"],
        ),
        # leaves three files where the cap is two
        "spill": agent(
            [
                tool_step(
                    "bash", {"command": "mkdir -p out && echo a > out/a && echo b > out/b && echo c > out/c"}
                ),
                text_step("done"),
            ],
            ["bash"],
            artifacts={"max_files": 2},
        ),
        # plants links to a host file and directory among its outputs
        "planter": agent(
            [
                tool_step(
                    "bash", {"command": "mkdir -p out && ln -s /etc/passwd out/leak && ln -s / out/root"}
                ),
                tool_step("bash", {"command": "echo ok > out/ok.txt"}, id="t2"),
                text_step("done"),
            ],
            ["bash"],
        ),
        # its messages show the input files that fit in 12 bytes, and name the rest
        "announcer": agent([text_step("done")], [], input_files={"show": "content", "max_bytes": 12}),
    },
}


@contextlib.asynccontextmanager
async def service(tmp_path: Path) -> AsyncIterator[JobService]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state) as jobs,
    ):
        yield jobs


async def logs(jobs: JobService, job_id: str) -> list[str]:
    return [e.data.message for e in await jobs.logs(job_id) if isinstance(e.data, LogLine)]


async def test_a_file_goes_in_and_an_artifact_comes_back(tmp_path: Path) -> None:
    async with service(tmp_path) as jobs:
        job = await jobs.run("upper", TurnInput.new("go"), files=[("data//in.txt", b"hello from the host\n")])
        assert job.state is JobState.SUCCEEDED, job.error
        finished = [
            e.data.event
            for e in await jobs.store.events(job.id, kind="sandbox")
            if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolFinished)
        ]
        assert "hello from the host" in finished[0].output
        [artifact] = await jobs.artifacts(job.id)
        assert (artifact.path, artifact.size) == ("out/upper.txt", 20)
        assert await jobs.artifact(job.id, "out/upper.txt") == b"HELLO FROM THE HOST\n"
        assert [f.path for f in await jobs.input_files(job.id)] == ["data/in.txt"]
        assert "1 artifact(s) kept (20 bytes)" in await logs(jobs, job.id)


async def test_the_message_announces_the_input_files_as_the_agent_says(tmp_path: Path) -> None:
    files = [("notes.txt", b"x" * 20), ("data/in.txt", b"hello\n"), ("blob", b"\x00\x01")]
    async with service(tmp_path) as jobs:
        job = await jobs.run("announcer", TurnInput.new("go"), files=files)
        assert job.state is JobState.SUCCEEDED, job.error
        stored = (await jobs.get(job.id)).input.message
        assert stored.as_text() == "go"  # the user's words stay the first block
        assert stored.joined_text() == (
            "go\nFiles given with this message, in the working directory:\n"
            "- blob (2 bytes, binary, not shown)\n"
            '<file path="data/in.txt">\nhello\n</file>\n'
            "- notes.txt (20 bytes, not shown)"
        )
        plain = await jobs.run("upper", TurnInput.new("go"), files=[("data/in.txt", b"hello\n")])
        assert (await jobs.get(plain.id)).input.message.root == "go"  # unset: nothing is announced


async def test_submit_and_download_through_the_api(tmp_path: Path) -> None:
    async with (
        service(tmp_path) as jobs,
        ControllerServer(jobs, "t0ken", "127.0.0.1:0") as server,
        ControllerClient(server.address, "t0ken") as client,
    ):
        job = await client.submit("upper", "go", files=[("data/in.txt", b"hello from the host\n")])
        done = await jobs.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert [(a.path, a.size) for a in await client.artifacts(job.id)] == [("out/upper.txt", 20)]
        assert await client.artifact(job.id, "out/upper.txt") == b"HELLO FROM THE HOST\n"
        with pytest.raises(ControllerError) as missing:
            await client.artifact(job.id, "out/nothing")
        assert missing.value.code == grpc.StatusCode.NOT_FOUND.name
        with pytest.raises(ControllerError) as escape:
            await client.submit("upper", "go", files=[("../../etc/cron.d/x", b"x")])
        assert escape.value.code == grpc.StatusCode.INVALID_ARGUMENT.name
        assert "leaves the workspace" in str(escape.value)
        with pytest.raises(ControllerError) as big:
            await client.submit("upper", "go", files=[("a", b"x" * 5_000_000), ("b", b"x" * 4_000_000)])
        assert big.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED.name
        assert "more than the cap of 8388608 bytes" in str(big.value)


@pytest.mark.parametrize(
    ("files", "error", "message"),
    [
        ([("/etc/passwd", b"x")], FileRefused, "is absolute"),
        ([("a/../../b", b"x")], FileRefused, "leaves the workspace"),
        ([("a", b"1"), ("./a", b"2")], FileRefused, "given twice"),
        ([(f"f{i}", b"") for i in range(201)], FilesOverCap, "201 files, more than the cap of 200"),
    ],
)
async def test_bad_input_files_are_refused_at_submit_and_no_job_is_made(
    tmp_path: Path, files: list[tuple[str, bytes]], error: type[Exception], message: str
) -> None:
    async with service(tmp_path) as jobs:
        with pytest.raises(error, match=message):
            await jobs.submit("upper", TurnInput.new("go"), files=files)
        assert await jobs.find() == []


async def test_artifacts_over_the_cap_are_refused_whole_and_the_job_says_why(tmp_path: Path) -> None:
    async with service(tmp_path) as jobs:
        job = await jobs.run("spill", TurnInput.new("go"))
        assert job.state is JobState.SUCCEEDED, job.error
        assert await jobs.artifacts(job.id) == []
        assert "artifacts refused: 3 files, more than the cap of 2" in await logs(jobs, job.id)


async def test_links_among_the_outputs_are_not_followed(tmp_path: Path) -> None:
    async with service(tmp_path) as jobs:
        job = await jobs.run("planter", TurnInput.new("go"))
        assert job.state is JobState.SUCCEEDED, job.error
        assert [a.path for a in await jobs.artifacts(job.id)] == ["out/ok.txt"]
        lines = await logs(jobs, job.id)
        assert "artifact out/leak not collected: a symbolic link (never followed)" in lines
        assert "artifact out/root not collected: a symbolic link (never followed)" in lines
