"""What authentication, authorization, tenancy and quotas add to a jobs-API call.

One controller (real gRPC on loopback, real JobService and SQLite, not started: jobs stay
queued) serves ``GetJob`` of one job to the same client loop, interleaved, as:

- **before** (the floor): today's single-token path before principals — the same servicer
  call (``JobService.get`` → proto) behind ``airlock.wire.BearerAuth`` and nothing else;
- **bootstrap**: the bootstrap token through the Authenticator, the principal's tenant and
  role checks, the per-call context;
- **API key**: a real key (``KeyStore``: hash check, its cache as in production);
- **OIDC**: an RS256 JWT verified against a JWKS file (signature, iss, aud, exp every call).

Each row prints p50 and p99 (ms) and the p50 added to the floor; the target is at most
0.3 ms added at p50. Another tenant's job id and an id that never existed are timed the same
way (they must answer alike).

Then quotas: bursts of 50 concurrent ``SubmitJob`` as one tenant, without quotas and with a
``concurrent_jobs`` quota every submit must pass (the checks run, nothing is refused):
submits/s of each (target: within 10%); and one burst of 50 against ``concurrent_jobs: 25``
(target: exactly 25 admitted).

Usage: ``python bench/auth_overhead.py [--calls 2000] [--bursts 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.config import load_config
from airlock.controller import (
    AgentRunner,
    ControllerServer,
    IdentityApi,
    JobService,
    SqliteJobStore,
    new_job_id,
)
from airlock.identity import Authenticator, KeyStore, OidcVerifier, RoleBook
from airlock.jobs import convert as jc
from airlock.state import SqliteStore
from bench._common import pct
from layer0 import TurnInput

TOKEN = "bench-bootstrap-token"
ISSUER, AUDIENCE = "https://idp.bench", "airlock"


class _Before(cpb_grpc.ControllerServicer):
    """GetJob exactly as it was served before principals: the service's job, as proto."""

    def __init__(self, service: JobService) -> None:
        self.service = service

    async def GetJob(self, request: cpb.GetJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        return jc.job_to_proto(await self.service.get(request.id))


def _jwks_and_token(where: Path) -> tuple[Path, str]:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**RSAAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "k1", "use": "sig"}
    path = where / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "olga", "iat": now, "exp": now + 3600}
    claims |= {"tenant": "red", "roles": ["viewer"]}
    return path, jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


@asynccontextmanager
async def _controller(
    tmp: Path, auth: dict[str, Any]
) -> AsyncIterator[tuple[JobService, str, dict[str, str]]]:
    """A controller of ``auth`` serving on loopback, its service and a credential per path."""
    (tmp / "s.yaml").write_text("steps: []\n")
    agent = {"provider": {"kind": "scripted", "script": "s.yaml"}, "backend": "process"}
    (tmp / "airlock.yaml").write_text(yaml.safe_dump({"version": 1, "agents": {"a": agent}, "auth": auth}))
    config = load_config(tmp / "airlock.yaml")
    book = RoleBook(config.auth.roles)
    async with (
        SqliteJobStore(tmp / "jobs.db") as store,
        SqliteStore(tmp / "state.db") as state,
        KeyStore(tmp / "keys.db", book) as keys,
    ):
        service = JobService(store, AgentRunner(config), state, auth=config.auth)
        oidc = OidcVerifier(config.auth.oidc, book) if config.auth.oidc is not None else None
        server = ControllerServer(
            service,
            TOKEN,
            "127.0.0.1:0",
            authenticator=Authenticator(keys, oidc, book, TOKEN),
            identity=IdentityApi(keys, config.auth, service.quotas, store),
        )
        async with server:
            _, secret = await keys.create("kim", "red", ["viewer"], created_by="bench", expires_at=None)
            assert server.address is not None
            yield service, server.address, {"bootstrap": TOKEN, "key": secret}


@asynccontextmanager
async def _before(service: JobService) -> AsyncIterator[str]:
    server = grpc.aio.server(interceptors=[wire.BearerAuth(TOKEN)])
    cpb_grpc.add_ControllerServicer_to_server(_Before(service), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


Call = Callable[[], Awaitable[Any]]


async def _timed(calls: dict[str, Call], n: int) -> dict[str, list[float]]:
    """``n`` rounds of every call, interleaved (one warm-up each first); ms per call."""
    for call in calls.values():
        with contextlib.suppress(grpc.aio.AioRpcError):
            await call()
    found: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            start = time.perf_counter()
            with contextlib.suppress(grpc.aio.AioRpcError):  # the refusal rows: timed alike
                await call()
            found[name].append((time.perf_counter() - start) * 1000)
    return found


def _getter(channel: grpc.aio.Channel, job_id: str, credential: str) -> Call:
    stub = cpb_grpc.ControllerStub(channel)
    metadata = (("authorization", f"Bearer {credential}"),)
    return lambda: stub.GetJob(cpb.GetJobRequest(id=job_id), metadata=metadata)


async def latency(n: int) -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        jwks, token = _jwks_and_token(Path(tmp))
        auth = {"oidc": {"issuer": ISSUER, "audience": AUDIENCE, "jwks_file": str(jwks)}}
        async with _controller(Path(tmp), auth) as (service, address, creds):
            red = await service.submit("a", TurnInput.new("x"), tenant="red", owner="kim")
            blue = await service.submit("a", TurnInput.new("y"), tenant="blue", owner="bo")
            async with (
                _before(service) as old,
                grpc.aio.insecure_channel(old) as before,
                grpc.aio.insecure_channel(address) as now,
            ):
                calls = {
                    "before: one shared token": _getter(before, red.id, TOKEN),
                    "bootstrap token": _getter(now, red.id, creds["bootstrap"]),
                    "API key": _getter(now, red.id, creds["key"]),
                    "OIDC token (RS256)": _getter(now, red.id, token),
                    "API key, another tenant's id": _getter(now, blue.id, creds["key"]),
                    "API key, an id never made": _getter(now, new_job_id(), creds["key"]),
                }
                found = await _timed(calls, n)
    return [(name, statistics.median(ms), pct(ms, 0.99)) for name, ms in found.items()]


async def _burst(address: str, credential: str, size: int) -> tuple[float, int]:
    """``size`` concurrent submits on one channel: (seconds, how many were admitted)."""
    request = cpb.SubmitJobRequest(agent="a", input=wire.input_to_proto(TurnInput.new("w")))
    metadata = (("authorization", f"Bearer {credential}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = cpb_grpc.ControllerStub(channel)

        async def one() -> bool:
            try:
                await stub.SubmitJob(request, metadata=metadata)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                return False
            return True

        start = time.perf_counter()
        admitted = await asyncio.gather(*(one() for _ in range(size)))
        return time.perf_counter() - start, sum(admitted)


async def quotas(bursts: int) -> tuple[float, float, int]:
    """Submits/s without quotas and with a passing one (median of ``bursts`` bursts of 50,
    interleaved), and how many of 50 a quota of 25 admits."""
    rates: dict[str, list[float]] = {"none": [], "quota": []}
    with (
        tempfile.TemporaryDirectory() as a,
        tempfile.TemporaryDirectory() as b,
        tempfile.TemporaryDirectory() as c,
    ):
        async with (
            _controller(Path(a), {}) as (_, free, free_creds),
            _controller(Path(b), {"default_quotas": {"concurrent_jobs": 100000}}) as (_, limited, lim_creds),
            _controller(Path(c), {"default_quotas": {"concurrent_jobs": 25}}) as (_, tight, tight_creds),
        ):
            for _ in range(bursts + 1):  # the first of each is a warm-up
                for name, address, creds in (("none", free, free_creds), ("quota", limited, lim_creds)):
                    seconds, admitted = await _burst(address, creds["bootstrap"], 50)
                    assert admitted == 50
                    rates[name].append(50 / seconds)
            _, admitted = await _burst(tight, tight_creds["bootstrap"], 50)
    return statistics.median(rates["none"][1:]), statistics.median(rates["quota"][1:]), admitted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--bursts", type=int, default=10)
    args = parser.parse_args()
    rows = asyncio.run(latency(args.calls))
    floor = rows[0][1]
    print(f"GetJob over loopback gRPC, {args.calls} calls each, interleaved (ms)")
    print(f"{'path':34} {'p50':>7} {'p99':>7} {'added p50':>10}  target <= 0.300 added")
    failed = False
    for name, p50, p99 in rows:
        added = p50 - floor
        within = "" if name.startswith("before") else ("ok" if added <= 0.3 else "MISSED")
        failed |= within == "MISSED" and "another" not in name and "never" not in name
        print(f"{name:34} {p50:7.3f} {p99:7.3f} {added:+10.3f}  {within}")
    none, quota, admitted = asyncio.run(quotas(args.bursts))
    ratio = quota / none
    print(f"\n50 concurrent SubmitJob, median of {args.bursts} bursts (submits/s)")
    print(f"{'no quota':34} {none:9.1f}")
    print(f"{'a concurrent_jobs quota, checked':34} {quota:9.1f}  ratio {ratio:.2f} (target >= 0.90)")
    print(f"{'50 against concurrent_jobs: 25':34} {admitted:9d} admitted (target: exactly 25)")
    failed |= admitted != 25
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
