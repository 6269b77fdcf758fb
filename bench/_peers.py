"""The peers' side of ``python -m bench``: llm-sandbox and SWE-ReX, measured in their own
virtualenv (``bench/setup-peers.sh``) on the same image and machine.

``bench/run.py`` starts one worker per peer (:class:`PeerWorker`: ``.venv-peers/bin/python -m
bench._peers PEER --image IMG --label KEY=VALUE``, from the repository) and keeps it for the
whole run, so the peers' measurements interleave with airlock's. The worker prints one JSON
line saying whether the peer imports (``{"ready": true, "version": ...}``), then answers one
JSON line per request line:

- ``{"op": "cycle", "calls": N}``: a cold sandbox to its first command (``true``), N more
  trivial commands (after 2 untimed), teardown → ``first_s``, ``calls_s``, ``teardown_s``;
- ``{"op": "batch", "n": N}``: N sandboxes started at once, each start, ``true``, teardown
  → ``wall_s``, ``latencies_s``, ``errors``, ``mem_mib`` (each sandbox's peak).

Every container carries the label, so the parent can remove them whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from asyncio.subprocess import PIPE
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from bench._common import MemorySampler, remove_labelled, thread_batch

ROOT = Path(__file__).resolve().parents[1]
#: Commands timed per cycle are preceded by this many untimed ones (lazy paths, first exec).
WARMUP_CALLS = 2


class LlmSandbox:
    """llm-sandbox, tuned: no environment setup (no venv, no pip), Docker's init."""

    dist = "llm-sandbox"

    def __init__(self, image: str, label: str) -> None:
        from llm_sandbox import SandboxSession

        self.session = SandboxSession
        self.image = image
        key, _, value = label.partition("=")
        self.labels = {key: value}

    def start(self) -> Any:
        session = self.session(
            backend="docker",
            image=self.image,
            lang="python",
            skip_environment_setup=True,
            keep_template=True,
            runtime_configs={"init": True, "labels": dict(self.labels)},
        )
        session.open()
        return session

    def call(self, session: Any) -> None:
        result = session.execute_command("true")
        if result.exit_code != 0:
            raise RuntimeError(f"`true` exited {result.exit_code}")

    def stop(self, session: Any) -> None:
        session.close()


class SweRex:
    """SWE-ReX: its HTTP server in the container (preinstalled), one event loop per sandbox
    (several sandboxes started in one loop deadlock)."""

    dist = "swe-rex"

    def __init__(self, image: str, label: str) -> None:
        from swerex.deployment.docker import DockerDeployment
        from swerex.runtime.abstract import Command

        self.deployment = DockerDeployment
        self.command = Command
        self.image = image
        self.label = label

    def start(self) -> Any:
        loop = asyncio.new_event_loop()
        deployment = self.deployment(
            image=self.image, pull="never", docker_args=["--label", self.label], startup_timeout=60
        )
        try:
            loop.run_until_complete(deployment.start())
        except BaseException:
            loop.run_until_complete(deployment.stop())
            loop.close()
            raise
        return loop, deployment

    def call(self, handle: Any) -> None:
        loop, deployment = handle
        result = loop.run_until_complete(deployment.runtime.execute(self.command(command="true", shell=True)))
        if result.exit_code != 0:
            raise RuntimeError(f"`true` exited {result.exit_code}")

    def stop(self, handle: Any) -> None:
        loop, deployment = handle
        try:
            loop.run_until_complete(deployment.stop())
        finally:
            loop.close()


PEERS: dict[str, Callable[[str, str], LlmSandbox | SweRex]] = {"llm-sandbox": LlmSandbox, "swe-rex": SweRex}


def cycle(peer: LlmSandbox | SweRex, calls: int) -> dict[str, Any]:
    """Cold start to the first command, ``calls`` round trips, teardown."""
    t0 = time.perf_counter()
    handle = peer.start()
    try:
        peer.call(handle)
        first = time.perf_counter() - t0
        times = []
        for i in range(WARMUP_CALLS + calls):
            t1 = time.perf_counter()
            peer.call(handle)
            if i >= WARMUP_CALLS:
                times.append(time.perf_counter() - t1)
    finally:
        t2 = time.perf_counter()
        peer.stop(handle)
    return {"first_s": first, "calls_s": times, "teardown_s": time.perf_counter() - t2}


def batch(peer: LlmSandbox | SweRex, n: int, client: Any, label: str) -> dict[str, Any]:
    """``n`` sandboxes started at once, each through its first command and teardown."""

    def one() -> None:
        handle = peer.start()
        try:
            peer.call(handle)
        finally:
            peer.stop(handle)

    with MemorySampler(client, label) as memory:
        result = thread_batch(n, one)
    return {
        "wall_s": result.wall_s,
        "latencies_s": result.latencies_s,
        "errors": result.errors,
        "mem_mib": memory.per_container(),
    }


def serve(peer: LlmSandbox | SweRex, label: str, out: IO[str]) -> None:
    """Answer requests from stdin until it closes."""
    import docker

    client = docker.from_env()
    try:
        for line in sys.stdin:
            request = json.loads(line)
            try:
                if request["op"] == "cycle":
                    answer = cycle(peer, int(request["calls"]))
                else:
                    answer = batch(peer, int(request["n"]), client, label)
            except Exception as e:
                answer = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(answer), file=out, flush=True)
    finally:
        remove_labelled(client, label)
        client.close()


# -- the parent's side (in airlock's virtualenv) ---------------------------------------------


class PeerWorker:
    """The parent's side: one peer's worker process (this module, in the peers' virtualenv), kept
    for the whole run."""

    def __init__(self, peer: str, python: Path, image: str, label: str, log: Path) -> None:
        self.peer, self.python, self.image, self.label, self.log = peer, python, image, label, log
        self.proc: asyncio.subprocess.Process | None = None
        self.version = ""

    async def start(self) -> str | None:
        """Start it; None when ready, else why the peer cannot be measured."""
        err = await asyncio.to_thread(self.log.open, "wb")
        try:
            command = ["-m", "bench._peers", self.peer, "--image", self.image, "--label", self.label]
            self.proc = await asyncio.create_subprocess_exec(
                str(self.python), *command, cwd=ROOT, stdin=PIPE, stdout=PIPE, stderr=err
            )
        finally:
            err.close()
        hello = await self._read(60)
        if not hello.get("ready"):
            return str(hello.get("why", "worker failed"))
        self.version = str(hello.get("version", ""))
        return None

    async def request(self, timeout: float, **op: Any) -> dict[str, Any]:  # noqa: ASYNC109
        """One request; its answer (raises on the worker's error or death). A worker that does
        not answer in time is killed: a late answer would be taken for the next request's."""
        assert self.proc is not None and self.proc.stdin is not None
        if self.proc.returncode is not None:
            raise RuntimeError(f"{self.peer} worker stopped (exit {self.proc.returncode})")
        self.proc.stdin.write((json.dumps(op) + "\n").encode())
        await self.proc.stdin.drain()
        try:
            answer = await self._read(timeout)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    async def _read(self, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
        assert self.proc is not None and self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            tail = await asyncio.to_thread(self._log_tail)
            raise RuntimeError(f"{self.peer} worker exited: {tail}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _log_tail(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:]) or "(no output)"

    async def close(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


# -- the worker's side (in the peers' virtualenv) ---------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("--image", required=True)
    parser.add_argument("--label", required=True, help="KEY=VALUE put on every container")
    args = parser.parse_args()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the peers print goes to stderr, not into the answers
    logging.disable(logging.INFO)
    try:
        peer = PEERS[args.peer](args.image, args.label)
    except ImportError as e:
        print(json.dumps({"ready": False, "why": f"not installed ({e.name})"}), file=out, flush=True)
        return 0
    version = metadata.version(peer.dist)
    print(json.dumps({"ready": True, "version": version}), file=out, flush=True)
    serve(peer, args.label, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
