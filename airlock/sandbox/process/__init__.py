"""The process backend: the runner as a local subprocess — the weakest boundary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from airlock.policy import SecretResolver
from layer0 import ProcessIsolation

from .._declaration import Backend, Capabilities, DoctorCheck
from .._pool import WarmPool
from ._backend import ProcessBackend
from ._environment import LocalProcessEnvironment

__all__ = ["BACKEND", "LocalProcessEnvironment", "ProcessBackend"]


async def _doctor(settings: BaseModel | None = None) -> list[DoctorCheck]:
    return [
        DoctorCheck(
            "process",
            "ok",
            f"process backend available (runner under {sys.executable}; no isolation beyond a process)",
        )
    ]


def _create(
    *,
    secrets: SecretResolver | None,
    state_dir: Path | None,
    image: str | None,
    sweep: bool,
    settings: BaseModel | None,
    pool: WarmPool[Any] | None = None,
) -> ProcessBackend:
    """A process sandbox: it has no control directory of its own to place, no image, leaves
        nothing behind to sweep (its runner dies with its process group, and stops by itself when its
    controller dies: ``--exit-with-parent``), and keeps no pool."""
    return ProcessBackend(secrets=secrets)


BACKEND = Backend(
    name="process",
    summary="the runner as a local process of your user: no network, resource or credential isolation",
    isolations=frozenset({"process"}),
    default_isolation=(ProcessIsolation(),),
    capabilities=Capabilities(
        network_policy=False, resource_limits=False, credentials=False, model_endpoint="loopback"
    ),
    factory=_create,
    doctor=_doctor,
)
