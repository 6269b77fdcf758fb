"""The airlock exception tree (layer0's errors are separate: ``layer0.Layer0Error``).

Every subclass of :class:`AirlockError`, wherever it is defined (the package in brackets;
the rest live here)::

    AirlockError
    ├── ConfigError              invalid agent/airlock configuration (file, line, key)
    │   ├── InvalidConfigError   configuration files with every problem found [airlock.config]
    │   └── PolicyError          a spec's network or credential part is unsafe [airlock.policy]
    ├── SpecError                an AgentSpec names an unknown provider/tool or is inconsistent
    ├── ToolError                a tool failed (kind: not_found | invalid_input | execution_failed |
    │                             permission_denied | cancelled | model_retry)
    ├── RunnerError              the runner or its channel failed (status code + message)
    │   ├── RunnerCallError      a runner control call failed (gRPC status name) [airlock.runner]
    │   └── MalformedMessage     a protobuf message does not carry a valid value [airlock.wire]
    ├── ImageError               a sandbox image is missing or cannot be built
    ├── TurnLoopError            a turn loop is misused (a step while one runs) [airlock.turn]
    ├── SuspendedForApproval     a turn stopped before calls that wait for approval [airlock.turn]
    ├── TurnNotRunning           a turn has no runner to control now [airlock.sandbox]
    ├── SandboxBusy              a long-lived sandbox runs a job now [airlock.sandbox]
    ├── WeaveError               a stored weave cannot be read back or written [airlock.weave]
    ├── FileRefused              a file may not enter or leave a workspace (a path leaving it, a
    │   │                         link or special file in the way) [airlock.policy]
    │   ├── FilesOverCap         a set of files over a count or size cap, refused whole
    │   └── ManifestRefused      a snapshot or manifest that does not describe a workspace
    ├── LocalModelError          the local model cannot be prepared, started or stopped
    │   │                         [airlock.localmodel]
    │   ├── ModelFileError       the cached model file is missing, partial or corrupt
    │   ├── ModelFetchError      downloading or reassembling the model failed
    │   ├── RuntimeSetupError    the llama-cpp-python wheel or its venv cannot be set up
    │   └── ServerStartError     the model server exited or timed out before it was healthy
    ├── ControllerError          a controller RPC failed (gRPC status name) [airlock.controller]
    ├── ControllerServerError    the controller server cannot start [airlock.controller]
    ├── WebServerError           the HTTP API cannot be served (address, TLS files) [airlock.web]
    ├── TlsFileError             a TLS certificate, key or CA file is missing, unreadable or not
    │                             PEM [airlock.jobs]
    ├── JobNotAwaiting           the job is not in the state a request needs [airlock.controller]
    ├── NotAnApprover            the name may not decide on a job's calls [airlock.controller]
    ├── JournalViolation         a sandbox reported what no runner sends [airlock.controller]
    ├── WorkspaceViolation       a sandbox sent a workspace snapshot no runner sends
    │                             [airlock.controller]
    ├── ForkRefused              a job cannot be forked where asked (no such checkpoint, a
    │                             message inside a step) [airlock.controller]
    ├── SandboxNotFound          no long-lived sandbox has this id (or another tenant's)
    │                             [airlock.controller]
    ├── SandboxRefused           a long-lived sandbox cannot do that (another agent's, a changed
    │                             agent, no blob store, replicas) [airlock.controller]
    ├── JobStoreError            the job store cannot be read or written [airlock.controller]
    ├── LeaseLost                a replica wrote a job another replica adopted [airlock.controller]
    ├── DatabaseError            a SQLite file or PostgreSQL database cannot be reached, read or
    │                             written [airlock.state]
    ├── JobNotFound              no job has this id [airlock.controller]
    ├── PermissionDenied         the caller's roles lack a permission [airlock.controller]
    ├── QuotaExceeded            a tenant's quota would be exceeded [airlock.controller]
    ├── Unauthenticated          a credential is missing, wrong, revoked or expired [airlock.identity]
    ├── KeyNotFound              no API key has this id [airlock.identity]
    ├── InvalidKeyRequest        a key's name, tenant, roles or expiry is refused [airlock.identity]
    └── KeyStoreError            the API key store cannot be read or written [airlock.identity]
"""

from __future__ import annotations

from typing import Literal, Self


class AirlockError(Exception):
    """Root of every airlock error."""


class ConfigError(AirlockError):
    """Raised when configuration is invalid; the message names file, line and key."""


class SpecError(AirlockError):
    """Raised when an AgentSpec is invalid (e.g. an unknown provider or tool)."""


ToolErrorKind = Literal[
    "not_found", "invalid_input", "execution_failed", "permission_denied", "cancelled", "model_retry"
]


class ToolError(AirlockError):
    """Raised by a tool. The loop turns it into an error ``tool_result`` the model can read.

    ``ToolError.model_retry(hint)`` asks the model to correct itself: the hint becomes
    the error result's text.
    """

    def __init__(self, kind: ToolErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ToolErrorKind = kind
        self.message = message

    @classmethod
    def not_found(cls, message: str) -> Self:
        """No such tool."""
        return cls("not_found", message)

    @classmethod
    def invalid_input(cls, message: str) -> Self:
        """The input does not match the tool's schema."""
        return cls("invalid_input", message)

    @classmethod
    def execution_failed(cls, message: str) -> Self:
        """The tool ran and failed."""
        return cls("execution_failed", message)

    @classmethod
    def permission_denied(cls, message: str) -> Self:
        """The tool refused (e.g. a path outside the workspace)."""
        return cls("permission_denied", message)

    @classmethod
    def cancelled(cls, message: str = "cancelled") -> Self:
        """The call was cancelled."""
        return cls("cancelled", message)

    @classmethod
    def model_retry(cls, hint: str) -> Self:
        """Ask the model to try again; ``hint`` tells it what to change."""
        return cls("model_retry", hint)


class RunnerError(AirlockError):
    """Raised when the runner or its gRPC channel fails."""


class ImageError(AirlockError):
    """Raised when a sandbox image is missing (the message names the build command)."""


def shorten(text: str, limit: int) -> str:
    """``text`` within about ``limit`` UTF-8 bytes: its middle cut out, keeping its start
    (what is wrong) and its end (often the hint, e.g. the valid values)."""
    data = text.encode(errors="surrogatepass")
    if len(data) <= limit:
        return text
    head = data[: limit // 2].decode(errors="ignore")
    tail = data[len(data) - limit // 4 :].decode(errors="ignore")
    return f"{head}…({len(data)} bytes, cut)…{tail}"


#: A gRPC refusal's message travels (percent-encoded) in the ``grpc-message`` trailer, and a
#: client drops trailers above its metadata limit (8 KiB by default), turning the refusal into
#: an unrelated RESOURCE_EXHAUSTED. Each line and the whole are cut to these (UTF-8) sizes.
MAX_DETAIL_LINE_BYTES = 512
MAX_DETAIL_BYTES = 2000


def bounded_detail(message: str) -> str:
    """``message`` with each line and the whole cut to sizes every gRPC client accepts, so an
    echoed huge value (a 50 KB tool name, an agent name, a job id) never hides the answer."""
    lines = [shorten(line, MAX_DETAIL_LINE_BYTES) for line in message.splitlines()]
    return shorten("\n".join(lines), MAX_DETAIL_BYTES)
