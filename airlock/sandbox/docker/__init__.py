"""The Docker backend: each turn in a fresh hardened container on a real Docker engine."""

from ._config import GVISOR_RUNTIMES, KATA_RUNTIMES, SandboxDefaults
from ._environment import DockerEnvironment
from ._labels import LABEL_OWNER, LABEL_SANDBOX
from ._reaper import ReapReport, default_state_dir, reap_orphans

__all__ = [
    "GVISOR_RUNTIMES",
    "KATA_RUNTIMES",
    "LABEL_OWNER",
    "LABEL_SANDBOX",
    "DockerEnvironment",
    "ReapReport",
    "SandboxDefaults",
    "default_state_dir",
    "reap_orphans",
]
