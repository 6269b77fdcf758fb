"""Identity: who calls the controller (principals from API keys, OIDC tokens or the bootstrap
token), what roles let them do (permissions, agent globs), and the ``auth:`` settings
(tenants and their quotas). Pure of the controller: it stores keys and verifies tokens.

The key store, the OIDC verifier and the authenticator load at first use: reading
``airlock.yaml`` (which holds the ``auth:`` settings) needs neither SQLite nor an HTTP client.
"""

import typing as _typing  # as private names: this package exports exactly __all__

from airlock.lazy import lazy_names as _lazy_names

from ._errors import InvalidKeyRequest, KeyNotFound, KeyStoreError, Unauthenticated
from ._principal import DEFAULT_TENANT, Grant, Method, Permission, Principal
from ._retention import RetentionSettings, TenantRetention, parse_retention
from ._roles import BUILTIN_ROLES, RoleBook, RoleDefinition, allows
from ._settings import NAME_PATTERN, AuthSettings, OidcClaims, OidcSettings, TenantQuota, TenantSettings
from ._throttle import FailureThrottle

if _typing.TYPE_CHECKING:
    from ._authenticate import Authenticator
    from ._key_record import ApiKeyRecord
    from ._key_tables import KEY_TABLES
    from ._keys import KeyStore
    from ._oidc import OidcVerifier

__all__ = [
    "BUILTIN_ROLES",
    "DEFAULT_TENANT",
    "KEY_TABLES",
    "NAME_PATTERN",
    "ApiKeyRecord",
    "AuthSettings",
    "Authenticator",
    "FailureThrottle",
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
    "RetentionSettings",
    "RoleBook",
    "RoleDefinition",
    "TenantQuota",
    "TenantRetention",
    "TenantSettings",
    "Unauthenticated",
    "allows",
    "parse_retention",
]

_WHERE = {
    "Authenticator": "._authenticate",
    "ApiKeyRecord": "._key_record",
    "KEY_TABLES": "._key_tables",
    "KeyStore": "._keys",
    "OidcVerifier": "._oidc",
}

if not _typing.TYPE_CHECKING:  # mypy sees the imports above: a module __getattr__ would type every name Any
    __getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)
