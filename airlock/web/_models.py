"""The HTTP API's request bodies (pydantic v2: a bad field is a 422 naming it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: The longest agent, queue or session name accepted.
_NAME = 200


class InputFile(BaseModel):
    """A file placed in the job's workspace."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=4096)
    #: The content, base64 (standard alphabet).
    content_base64: str


class SubmitBody(BaseModel):
    """A job to submit."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=_NAME)
    message: str = Field(min_length=1)
    session: str | None = Field(default=None, min_length=1, max_length=_NAME)
    queue: str | None = Field(default=None, min_length=1, max_length=_NAME)
    max_duration_ms: int | None = Field(default=None, ge=1, le=2**62)
    files: list[InputFile] = Field(default_factory=list)


class CancelBody(BaseModel):
    """Why a job is cancelled."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=4096)


class ForkBody(BaseModel):
    """Where a fork starts and how it goes on (every field optional)."""

    model_config = ConfigDict(extra="forbid")

    #: A checkpoint number, or a record ``JOB:n``; empty: the last checkpoint.
    at: str = Field(default="", max_length=256)
    #: Continue the conversation with this user message (at a step boundary).
    message: str = Field(default="", max_length=1 << 20)
    #: Run the fork under this agent (empty: the original's).
    agent: str = Field(default="", max_length=256)


class ApproveBody(BaseModel):
    """An approval, recorded as the authenticated principal."""

    model_config = ConfigDict(extra="forbid")

    comment: str = Field(default="", max_length=4096)


class RejectBody(BaseModel):
    """A rejection; ``reason`` is what the model reads."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=4096, pattern=r"\S")
