"""The chart's identity settings: ``auth.config`` becomes airlock.yaml's ``auth:`` section (the
controller loads it as written: roles, tenants, quotas, OIDC), an OIDC JWKS from a ConfigMap is
mounted for offline clusters, a misspelt key fails the install, and the bootstrap key lives
only in its Secret: no ConfigMap holds it."""

from __future__ import annotations

import base64
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helm import CHART, helm, objects, render

from .test_chart_values import chart_config

AUTH = {
    "auth": {
        "config": {
            "roles": {"research-submitter": {"grants": ["submitter"], "agents": ["research-*"]}},
            "tenants": {"research": {"quotas": {"concurrent_jobs": 4, "cost_per_day": "20.00"}}},
            "default_quotas": {"jobs_per_minute": 30},
            "oidc": {
                "issuer": "https://login.example.com",
                "audience": "airlock",
                "jwks_file": "/etc/airlock/oidc/jwks.json",
                "claims": {"name": "email", "tenant": "team", "roles": "groups"},
            },
        },
        "jwksConfigMap": "idp-keys",
    }
}


def _values(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "auth-values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def test_auth_config_reaches_the_controller_as_written(tmp_path: Path) -> None:
    config = chart_config(tmp_path, CHART / "examples" / "multi-agent.yaml", _values(tmp_path, AUTH))
    assert config.auth.roles["research-submitter"].agents == ("research-*",)
    assert config.auth.quotas("research").concurrent_jobs == 4
    assert config.auth.quotas("research").cost_per_day == Decimal("20.00")
    assert config.auth.quotas("elsewhere").jobs_per_minute == 30
    assert config.auth.oidc is not None and config.auth.oidc.jwks_file == Path("/etc/airlock/oidc/jwks.json")


def test_without_auth_config_the_controller_has_the_bootstrap_key_only(tmp_path: Path) -> None:
    config = chart_config(tmp_path, CHART / "examples" / "multi-agent.yaml")
    assert config.auth.oidc is None and config.auth.tenants == {} and config.auth.roles == {}


def test_an_offline_jwks_is_mounted_read_only_from_its_config_map(tmp_path: Path) -> None:
    docs = objects(render(CHART / "examples" / "multi-agent.yaml", _values(tmp_path, AUTH)))
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "oidc-jwks"]
    assert volume["configMap"] == {"name": "idp-keys", "items": [{"key": "jwks.json", "path": "jwks.json"}]}
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "oidc-jwks"]
    assert mount == {"name": "oidc-jwks", "mountPath": "/etc/airlock/oidc", "readOnly": True}


def test_no_config_map_holds_the_bootstrap_key() -> None:
    docs = objects(render(CHART / "examples" / "multi-agent.yaml"))
    (secret,) = [d for d in docs if d["kind"] == "Secret" and "token" in d.get("data", {})]
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) >= 32
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert maps and not any(token in yaml.safe_dump(m) for m in maps)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"tenant": {}}, "tenant"),
        ({"tenants": {"red": {"quotas": {"concurrent": 3}}}}, "concurrent"),
        ({"roles": {"x": {"grants": ["owner"]}}}, "roles.x.grants.0"),
    ],
)
def test_a_misspelt_auth_key_fails_the_install(config: dict[str, Any], says: str, tmp_path: Path) -> None:
    path = _values(tmp_path, {"auth": {"config": config}})
    done = helm("template", "rel", str(CHART), "-f", str(path), check=False)
    assert done.returncode != 0 and says in done.stderr
