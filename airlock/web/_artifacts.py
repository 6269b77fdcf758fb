"""A job's artifacts: the list, and one to download (always as an attachment, never rendered:
an agent's output is untrusted)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import Response

from ._auth import Caller
from ._deps import Service, job_for

router = APIRouter(prefix="/api/v1/jobs", tags=["artifacts"])


@router.get("/{job_id}/artifacts")
async def list_artifacts(job_id: str, principal: Caller, service: Service) -> dict[str, Any]:
    """The job's artifacts: path, size, SHA-256, in path order."""
    await job_for(service, principal, job_id, "see")
    found = await service.artifacts(job_id)
    return {"artifacts": [{"path": a.path, "size": a.size, "sha256": a.sha256} for a in found]}


@router.get(
    "/{job_id}/artifacts/{path:path}",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "the artifact"}},
)
async def download_artifact(job_id: str, path: str, principal: Caller, service: Service) -> Response:
    """One artifact's bytes."""
    await job_for(service, principal, job_id, "see")
    data = await service.artifact(job_id, path)
    name = quote(path.rsplit("/", 1)[-1])
    headers = {
        "Content-Disposition": f"attachment; filename*=UTF-8''{name}",
        "X-Content-Type-Options": "nosniff",
    }
    return Response(data, media_type="application/octet-stream", headers=headers)
