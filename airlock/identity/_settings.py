"""``auth:`` in airlock.yaml: OIDC, role definitions, tenants and their quotas."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from airlock.policy.resources import parse_cpu, parse_disk, parse_memory

from ._principal import DEFAULT_TENANT
from ._retention import TenantRetention
from ._roles import BUILTIN_ROLES, RoleDefinition

#: Names of tenants, principals and roles: what a person can type and a log can show.
NAME_PATTERN = r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$"


class TenantQuota(BaseModel):
    """Limits of one tenant; None: unlimited. Each exceeded one is ``RESOURCE_EXHAUSTED``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Jobs queued or running at once (children of a job count).
    concurrent_jobs: int | None = Field(default=None, ge=1)
    #: Jobs submitted in any 60 seconds.
    jobs_per_minute: int | None = Field(default=None, ge=1)
    #: Cost of the tenant's turns per UTC day, in the providers' currency (USD).
    cost_per_day: Decimal | None = Field(default=None, ge=0)
    #: The largest sandbox a job may ask for (Kubernetes-style quantities).
    max_cpu: str | None = None
    max_memory: str | None = None
    max_disk: str | None = None
    #: Bytes of artifacts the tenant's jobs keep in all.
    artifact_bytes: int | None = Field(default=None, ge=0)

    @field_validator("max_cpu")
    @classmethod
    def _cpu(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cpu(value)
        return value

    @field_validator("max_memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None:
            parse_memory(value)
        return value

    @field_validator("max_disk")
    @classmethod
    def _disk(cls, value: str | None) -> str | None:
        if value is not None:
            parse_disk(value)
        return value


class TenantSettings(BaseModel):
    """One tenant of ``auth.tenants``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    quotas: TenantQuota = Field(default_factory=TenantQuota)
    #: How long the tenant's finished jobs are kept (None: ``retention.finished_jobs``).
    retention: TenantRetention | None = None


class OidcClaims(BaseModel):
    """Which claims of a token name the principal, its tenant and its roles."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "sub"
    #: The claim holding the tenant; None: every OIDC principal is in ``default_tenant``.
    tenant: str | None = "tenant"
    default_tenant: str | None = None
    #: The claim holding a list of role names (or group names mapped by ``role_map``).
    roles: str = "roles"
    #: Claim values → role names (e.g. an IdP group → ``approver``); unmapped values that are
    #: role names are kept, others dropped.
    role_map: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class OidcSettings(BaseModel):
    """People sign in with an OIDC provider; the controller verifies their JWTs offline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    issuer: str = Field(min_length=1)
    audience: str = Field(min_length=1)
    #: Where the signing keys are: an https URL (fetched and cached), or a file (offline).
    jwks_url: str | None = None
    jwks_file: Path | None = None
    #: Accepted signature algorithms (never ``none``, never an HMAC one).
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    #: Seconds of clock skew tolerated on exp/nbf/iat.
    leeway_s: int = Field(default=30, ge=0, le=300)
    claims: OidcClaims = Field(default_factory=OidcClaims)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise ValueError("give exactly one of jwks_url and jwks_file")
        return self

    @field_validator("jwks_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        """Keys fetched in the clear could be swapped on the way: https, or plain http only to
        this machine (a test's or a sidecar's issuer)."""
        if value is None:
            return value
        url = urlsplit(value)
        loopback = url.hostname in ("localhost", "127.0.0.1", "::1")
        if url.scheme != "https" and not (url.scheme == "http" and loopback):
            raise ValueError(f"jwks_url must be an https URL (got {value!r}; plain http only to localhost)")
        return value

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        allowed = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
        bad = [a for a in value if a not in allowed]
        if bad or not value:
            raise ValueError(f"algorithms must be among {sorted(allowed)} (got {bad or 'none'})")
        return value


class AuthSettings(BaseModel):
    """The ``auth:`` section. Without it: the bootstrap key only (today's single token)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The bootstrap administrator's principal name (its key is the controller's token).
    bootstrap_name: str = Field(default="admin", pattern=NAME_PATTERN)
    #: The API key store (SQLite; None: ``keys.db`` in the controller's data directory).
    keys_file: Path | None = None
    oidc: OidcSettings | None = None
    roles: dict[str, RoleDefinition] = Field(default_factory=dict)
    tenants: dict[str, TenantSettings] = Field(default_factory=dict)
    #: The quotas of a tenant that ``tenants`` does not list.
    default_quotas: TenantQuota = Field(default_factory=TenantQuota)

    @model_validator(mode="after")
    def _known_names(self) -> Self:
        for name, role in self.roles.items():
            if name in BUILTIN_ROLES:
                raise ValueError(f"roles.{name}: a built-in role cannot be redefined")
            unknown = sorted(set(role.grants) - BUILTIN_ROLES.keys())
            if unknown:
                raise ValueError(
                    f"roles.{name}.grants: {unknown} are not built-in roles {sorted(BUILTIN_ROLES)}"
                )
        if self.oidc is not None:
            known = BUILTIN_ROLES.keys() | self.roles.keys()
            for group, targets in self.oidc.claims.role_map.items():
                unknown = sorted(set(targets) - known)
                if unknown:
                    raise ValueError(
                        f"oidc.claims.role_map.{group}: {unknown} are not roles (known: {sorted(known)})"
                    )
        return self

    def quotas(self, tenant: str) -> TenantQuota:
        """The quotas of ``tenant``."""
        found = self.tenants.get(tenant)
        return found.quotas if found is not None else self.default_quotas

    def tenant_names(self) -> list[str]:
        """The declared tenants, the default one first."""
        return [DEFAULT_TENANT, *sorted(set(self.tenants) - {DEFAULT_TENANT})]
