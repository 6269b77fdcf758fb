"""Identity: who calls the controller (principals from API keys, OIDC tokens or the bootstrap
token), what roles let them do (permissions, agent globs), and the ``auth:`` settings
(tenants and their quotas). Pure of the controller: it stores keys and verifies tokens."""

from ._errors import Unauthenticated
from ._principal import DEFAULT_TENANT, Grant, Method, Permission, Principal
from ._roles import BUILTIN_ROLES, RoleBook, RoleDefinition, allows
from ._settings import NAME_PATTERN, AuthSettings, OidcClaims, OidcSettings, TenantQuota, TenantSettings

__all__ = [
    "BUILTIN_ROLES",
    "DEFAULT_TENANT",
    "NAME_PATTERN",
    "AuthSettings",
    "Grant",
    "Method",
    "OidcClaims",
    "OidcSettings",
    "Permission",
    "Principal",
    "RoleBook",
    "RoleDefinition",
    "TenantQuota",
    "TenantSettings",
    "Unauthenticated",
    "allows",
]
