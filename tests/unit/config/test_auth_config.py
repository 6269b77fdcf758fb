"""``auth:`` in airlock.yaml: OIDC, roles, tenants and quotas, every problem at file:line:col."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.identity import AuthSettings, RoleDefinition

Write = Callable[..., Path]
One = Callable[[Path], str]
AGENTS = "agents: {}\n"


def test_without_auth_there_is_the_bootstrap_token_only(write: Write) -> None:
    assert load_config(write(AGENTS)).auth == AuthSettings()


def test_a_two_team_auth_section_loads(write: Write, tmp_path: Path) -> None:
    path = write(
        AGENTS
        + """
auth:
  bootstrap_name: root
  keys_file: state/keys.db
  oidc:
    issuer: https://idp.example.com
    audience: airlock
    jwks_file: jwks.json
    claims: {name: email, tenant: org, roles: groups, role_map: {idp-approvers: [team-a-approve]}}
  roles:
    team-a-submit: {grants: [submitter], agents: ["a-*"]}
    team-a-approve: {grants: [approver, viewer], agents: ["a-*"]}
  tenants:
    team-a:
      quotas: {concurrent_jobs: 4, jobs_per_minute: 30, cost_per_day: "12.50", max_memory: 2Gi}
  default_quotas: {concurrent_jobs: 1}
"""
    )
    auth = load_config(path).auth
    assert auth.bootstrap_name == "root"
    assert auth.keys_file == tmp_path / "state" / "keys.db"
    assert auth.oidc is not None and auth.oidc.jwks_file == tmp_path / "jwks.json"
    assert auth.oidc.claims.role_map == {"idp-approvers": ("team-a-approve",)}
    assert auth.roles["team-a-submit"] == RoleDefinition(grants=("submitter",), agents=("a-*",))
    quotas = auth.quotas("team-a")
    assert (quotas.concurrent_jobs, quotas.cost_per_day, quotas.max_memory) == (4, Decimal("12.50"), "2Gi")
    assert auth.quotas("team-z").concurrent_jobs == 1
    assert auth.tenant_names() == ["default", "team-a"]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("auth:\n  colour: blue\n", "3:3: auth.colour: unknown key 'colour'; valid keys: bootstrap_name, "),
        (
            "auth:\n  tenants:\n    t:\n      quotas: {max_memory: lots}\n",
            "5:16: auth.tenants.t.quotas.max_memory: memory 'lots' is not a byte quantity",
        ),
        (
            "auth:\n  default_quotas: {concurrent_jobs: 0}\n",
            "3:20: auth.default_quotas.concurrent_jobs: Input should be greater than or equal to 1",
        ),
        (
            "auth:\n  roles:\n    ops:\n      grants: [submitter, superuser]\n",
            "5:7: auth.roles.ops.grants: ['superuser'] are not built-in roles ['admin', 'approver', ",
        ),
        (
            "auth:\n  roles:\n    viewer: {grants: [viewer]}\n",
            "4:5: auth.roles.viewer: a built-in role cannot",
        ),
        (
            "auth:\n  oidc: {issuer: i, audience: a}\n",
            "3:3: auth.oidc: give exactly one of jwks_url and jwks_file",
        ),
        (
            "auth:\n  oidc: {issuer: i, audience: a, jwks_file: j.json, jwks_url: 'https://i/jwks'}\n",
            "3:3: auth.oidc: give exactly one of jwks_url and jwks_file",
        ),
        (
            "auth:\n  oidc: {issuer: i, audience: a, jwks_url: 'http://idp.example.com/jwks'}\n",
            "3:34: auth.oidc.jwks_url: jwks_url must be an https URL",
        ),
        (
            "auth:\n  oidc: {issuer: i, audience: a, jwks_file: j, algorithms: [HS256]}\n",
            "3:48: auth.oidc.algorithms: algorithms must be among ",
        ),
        (
            "auth:\n  oidc:\n    {issuer: i, audience: a, jwks_file: j, claims: {role_map: {dev: [root]}}}\n",
            "4:64: auth.oidc.claims.role_map.dev: ['root'] are not roles (known: ['admin', ",
        ),
    ],
)
def test_a_bad_auth_section_is_located(write: Write, one_issue: One, section: str, expected: str) -> None:
    path = write(AGENTS + section)
    assert one_issue(path).startswith(f"{path}:{expected}")


def test_auth_set_in_two_files_is_an_error(write: Write, one_issue: One) -> None:
    write("auth: {bootstrap_name: one}\n", "airlock.d/a.yaml")
    second = write(AGENTS + "auth: {bootstrap_name: two}\n", "airlock.d/b.yaml")
    assert "auth is set twice: " in one_issue(second.parent)


def test_a_role_used_by_nothing_is_fine(write: Write) -> None:
    auth = load_config(write(AGENTS + "auth:\n  roles:\n    spare: {grants: [viewer]}\n")).auth
    assert "spare" in auth.roles
