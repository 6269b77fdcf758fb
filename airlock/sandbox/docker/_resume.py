"""Before a job resumes: its previous Docker sandbox removed and confirmed gone.

A cold sandbox's containers (runner and egress proxy) carry :data:`LABEL_JOB`. A warm pool
member's labels are fixed before any job claims it, so it is found by its owner instead: a
crashed controller's sandboxes (members included) are its orphans, removed first. Then every
container of the job is force-removed and read back: only "no such container" confirms it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airlock.images import docker_errors
from layer0 import EnvError

from ._reaper import reap_orphans
from ._remove import force_remove

__all__ = ["LABEL_JOB", "ensure_job_gone"]

#: The job a sandbox's containers run for.
LABEL_JOB = "airlock.job"


def ensure_job_gone(client: Any, state_dir: Path, job: str) -> None:
    """Remove a dead controller's sandboxes and every container labelled with ``job``, and
    confirm each is gone (blocking).

    Raises:
        EnvError: ``provision_failed`` when one is still there, or the engine fails.
    """
    errors = docker_errors()
    try:
        swept = reap_orphans(client, state_dir)
        found = client.containers.list(all=True, filters={"label": f"{LABEL_JOB}={job}"})
        for container in found:
            force_remove(client, container.id)
        left = []
        for container in found:
            try:
                client.containers.get(container.id)
            except errors.NotFound:
                continue
            left.append(container.name)
    except errors.DockerException as e:
        raise _refused(job, f"Docker engine error: {e}") from e
    problems = [*swept.errors, *(f"container {name} is still there" for name in left)]
    if problems:
        raise _refused(job, "; ".join(problems))


def _refused(job: str, why: str) -> EnvError:
    return EnvError.provision_failed(
        f"job {job} is not resumed: its previous sandbox could not be confirmed gone, and its "
        f"tools must not run twice ({why})"
    )
