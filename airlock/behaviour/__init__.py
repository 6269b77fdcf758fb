"""airlock.behaviour: how an agent's jobs behave, as settings the controller applies.

Not what a sandbox may do (that is :mod:`airlock.policy`): these settings never reach a
sandbox, except the approval gate, which travels in the AgentSpec.

* :mod:`.approval` — who approves an agent's gated tool calls, and how decisions combine.
* :mod:`.durability` — what becomes of a job whose sandbox or controller was lost.
* :mod:`.input_files` — what the model is told of a job's input files.
"""

from .approval import ApprovalDecision, ApprovalPolicy
from .durability import LOST_CALL, DurabilityPolicy, WorkspacePolicy
from .input_files import InputFilesPolicy

__all__ = [
    "LOST_CALL",
    "ApprovalDecision",
    "ApprovalPolicy",
    "DurabilityPolicy",
    "InputFilesPolicy",
    "WorkspacePolicy",
]
