"""The process backend: the runner as a local subprocess — the weakest boundary."""

from ._environment import LocalProcessEnvironment

__all__ = ["LocalProcessEnvironment"]
