"""Servers the tests start in processes of their own: a free port, and waiting for gRPC
health SERVING (or the process's exit)."""

from __future__ import annotations

import socket
import subprocess
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_serving(address: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Poll the gRPC health service at ``address`` until it answers.

    Raises:
        AssertionError: ``proc`` exited, or nothing answered within ``timeout`` seconds.
    """
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + timeout
        while True:
            try:
                stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                return
            except grpc.RpcError:
                assert proc.poll() is None, f"the server exited with {proc.returncode}"
                assert time.monotonic() < deadline, f"nothing served at {address} within {timeout:g}s"
                time.sleep(0.2)
