"""Where an agent's sandboxes are scheduled (backend-neutral): node labels, tolerations and a
RuntimeClass, as an agent's ``placement:`` writes them (e.g. a GPU node pool).

Only a backend whose :attr:`~._backend.Capabilities.placement` is set honours a placement
(Kubernetes); the configuration refuses it for any other, and such a backend refuses a
request carrying one. A backend's own placement (``backends.kubernetes.node_selector`` and
``tolerations``) and an agent's combine by :meth:`Placement.over`: the agent's node selector
is merged over the backend's (the agent wins per key), the tolerations are the backend's
followed by the agent's.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from layer0 import EnvError

__all__ = ["Placement", "Toleration", "check_runtime_class", "refuse_placement"]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)$")


class Toleration(BaseModel):
    """A pod toleration (``spec.tolerations[]``), e.g. for a tainted gVisor, Kata or GPU node pool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    #: Also spelled ``tolerationSeconds``, as in a pod spec (the Helm chart passes them verbatim).
    toleration_seconds: int | None = Field(
        default=None, ge=0, validation_alias=AliasChoices("toleration_seconds", "tolerationSeconds")
    )

    def manifest(self) -> dict[str, object]:
        """The toleration as the API spells it (unset fields omitted)."""
        fields = {
            "key": self.key,
            "operator": self.operator,
            "value": self.value,
            "effect": self.effect,
            "tolerationSeconds": self.toleration_seconds,
        }
        return {k: v for k, v in fields.items() if v is not None}


def _dns_subdomain(value: str) -> bool:
    return len(value) <= 253 and bool(_DNS_SUBDOMAIN.match(value))


def check_runtime_class(value: str) -> str:
    """``value`` when it can name a RuntimeClass (a lower-case DNS subdomain).

    Raises:
        ValueError: it cannot.
    """
    if not _dns_subdomain(value):
        raise ValueError(f"runtime_class: {value!r} is not a RuntimeClass name (a lower-case DNS name)")
    return value


def _label_key(key: str) -> bool:
    """A Kubernetes label key: ``[prefix/]name`` (prefix a DNS subdomain, name 1-63 characters)."""
    prefix, _, name = key.rpartition("/")
    return (not prefix or _dns_subdomain(prefix)) and bool(_LABEL_NAME.match(name))


class Placement(BaseModel):
    """Where an agent's sandbox pods run: ``node_selector`` (node labels), ``tolerations``
    (taints they tolerate) and ``runtime_class`` (the sandbox pod's RuntimeClass, only with
    ``container`` isolation: a stronger boundary keeps its own, never replaced).

    Hashable (a warm pool's shape key includes it): two placements are equal when they
    select, tolerate and run the same.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    runtime_class: str | None = None

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            if not _label_key(key):
                raise ValueError(f"node_selector: {key!r} is not a label key ([prefix/]name)")
            if not _LABEL_VALUE.match(label):
                raise ValueError(
                    f"node_selector: {label!r} (of {key!r}) is not a label value "
                    "(at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter "
                    "or digit)"
                )
        return dict(sorted(value.items()))

    @field_validator("runtime_class")
    @classmethod
    def _runtime_class(cls, value: str | None) -> str | None:
        return None if value is None else check_runtime_class(value)

    def __hash__(self) -> int:
        return hash((tuple(self.node_selector.items()), self.tolerations, self.runtime_class))

    @property
    def empty(self) -> bool:
        """Whether it asks for nothing (the backend's own placement alone)."""
        return not self.node_selector and not self.tolerations and self.runtime_class is None

    def over(
        self, node_selector: dict[str, str], tolerations: tuple[Toleration, ...]
    ) -> tuple[dict[str, str], tuple[Toleration, ...]]:
        """This placement combined with a backend's: ``node_selector`` with this one's keys
        merged over it (this one wins per key), and ``tolerations`` followed by this one's
        (an identical toleration listed once)."""
        return {**node_selector, **self.node_selector}, tuple(
            dict.fromkeys((*tolerations, *self.tolerations))
        )


def refuse_placement(placement: Placement, backend: str) -> None:
    """For a backend that cannot place its sandboxes: refuse a request that asks it to.

    Raises:
        EnvError: ``isolation_violation`` when ``placement`` asks for anything.
    """
    if not placement.empty:
        raise EnvError.isolation_violation(
            f"the {backend} backend cannot place a sandbox (node_selector, tolerations, runtime_class); "
            "placement is honoured by the kubernetes backend"
        )
