"""Identity: who calls the controller (principals from API keys, OIDC tokens or the bootstrap
token), what roles let them do (permissions, agent globs), and the ``auth:`` settings
(tenants and their quotas). Pure of the controller: it stores keys and verifies tokens."""

from ._authenticate import Authenticator
from ._errors import InvalidKeyRequest, KeyNotFound, KeyStoreError, Unauthenticated
from ._key_record import ApiKeyRecord
from ._keys import KeyStore
from ._oidc import OidcVerifier
from ._principal import DEFAULT_TENANT, Grant, Method, Permission, Principal
from ._roles import BUILTIN_ROLES, RoleBook, RoleDefinition, allows
from ._settings import NAME_PATTERN, AuthSettings, OidcClaims, OidcSettings, TenantQuota, TenantSettings

__all__ = [
    "BUILTIN_ROLES",
    "DEFAULT_TENANT",
    "NAME_PATTERN",
    "ApiKeyRecord",
    "AuthSettings",
    "Authenticator",
    "Grant",
    "InvalidKeyRequest",
    "KeyNotFound",
    "KeyStore",
    "KeyStoreError",
    "Method",
    "OidcClaims",
    "OidcSettings",
    "OidcVerifier",
    "Permission",
    "Principal",
    "RoleBook",
    "RoleDefinition",
    "TenantQuota",
    "TenantSettings",
    "Unauthenticated",
    "allows",
]
