"""Several controller replicas on PostgreSQL: the chart passes the DSN only from a Secret,
rolls replicas one at a time, spreads them, bounds disruptions, gives every replica the same
audit key and an owner identity of its own, and keeps no SQLite volume; the schema refuses
more than one replica on SQLite; the default install is unchanged (one replica, Recreate, its
volume). The optional CloudNativePG Cluster has no schema in kubernetes-validate: its structure
is checked here against the CRD's fields the chart uses."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from airlock.controller._weaving import read_audit_key_file
from tests.support.helm import CHART, helm, objects, render

REPLICAS = CHART / "examples" / "replicas.yaml"
LATEST = str(kubernetes_validate.latest_version())
CNPG = ("store.postgres.cloudnativepg.enabled=true", "controller.replicas=2", "workspaces.store=off")


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def controller(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The Deployment, its pod spec and its one container."""
    (deployment,) = of_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return deployment, pod, container


def arg(container: dict[str, Any], name: str) -> str | None:
    args: list[str] = container["args"]
    return args[args.index(name) + 1] if name in args else None


def kube_settings(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (config_map,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-config")
    ]
    settings: dict[str, Any] = yaml.safe_load(config_map["data"]["airlock.yaml"])["backends"]["kubernetes"]
    return settings


def test_three_replicas_on_postgres_roll_spread_and_share_the_store_from_a_secret() -> None:
    docs = objects(render(REPLICAS))
    deployment, pod, container = controller(docs)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    # The DSN only from its Secret, never a value.
    env = next(e for e in container["env"] if e["name"] == "AIRLOCK_STORE")
    assert env == {
        "name": "AIRLOCK_STORE",
        "valueFrom": {"secretKeyRef": {"name": "airlock-store", "key": "dsn"}},
    }
    assert arg(container, "--lease") == "20"
    # No SQLite volume: the data directory is an emptyDir, no claim rendered or mounted.
    assert not of_kind(docs, "PersistentVolumeClaim")
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}
    assert not any("persistentVolumeClaim" in v for v in pod["volumes"])
    # One voluntary disruption at a time, of these pods.
    (budget,) = of_kind(docs, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # Spread over nodes and zones, never unschedulable for it.
    spread = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert set(spread) == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for constraint in spread.values():
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway" and constraint["maxSkew"] == 1
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
    # Long enough to stop the jobs, queue them for the others and leave (the default's is 60).
    assert pod["terminationGracePeriodSeconds"] == 120
    # Each replica its own owner identity (its pod's name), or one retires the other's sandboxes.
    assert "owner_identity" not in kube_settings(docs)
    for obj in docs:
        kubernetes_validate.validate(obj, LATEST, strict=True)


def test_every_replica_reads_one_audit_key_from_its_secret() -> None:
    docs = objects(render(REPLICAS))
    _, pod, container = controller(docs)
    assert arg(container, "--audit-key-file") == "/var/run/airlock/audit-key/audit.key"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "audit-key"]
    assert mount == {"name": "audit-key", "mountPath": "/var/run/airlock/audit-key", "readOnly": True}
    (volume,) = [v for v in pod["volumes"] if v["name"] == "audit-key"]
    assert volume["secret"] == {
        "secretName": "airlock-audit",
        "defaultMode": 0o440,  # root's, group fsGroup: what --audit-key-file accepts from root
        "items": [{"key": "audit.key", "path": "audit.key"}],
    }
    assert not [d for d in of_kind(docs, "Secret") if d["metadata"]["name"].endswith("-audit-key")]


def test_a_generated_audit_key_is_one_the_controller_accepts(tmp_path: Path) -> None:
    docs = objects(render(sets=("store.postgres.existingSecret=db", "workspaces.store=off")))
    (secret,) = [d for d in of_kind(docs, "Secret") if d["metadata"]["name"] == "rel-airlock-audit-key"]
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    text = base64.b64decode(secret["data"]["audit.key"]).decode()
    assert re.fullmatch(r"[0-9a-f]{64}", text)
    path = tmp_path / "audit.key"
    path.write_text(text)
    path.chmod(0o400)
    assert read_audit_key_file(path) == bytes.fromhex(text)
    _, pod, _ = controller(docs)
    (volume,) = [v for v in pod["volumes"] if v["name"] == "audit-key"]
    assert volume["secret"]["secretName"] == "rel-airlock-audit-key"


def test_one_replica_on_postgres_rolls_without_a_budget_or_spread() -> None:
    docs = objects(render(sets=("store.postgres.existingSecret=db", "workspaces.store=off")))
    deployment, pod, container = controller(docs)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert not of_kind(docs, "PodDisruptionBudget") and "topologySpreadConstraints" not in pod
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "db", "key": "dsn"}
    assert arg(container, "--lease") == "15"


def test_the_default_is_one_sqlite_controller_as_before() -> None:
    docs = objects(render())
    deployment, pod, container = controller(docs)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "env" not in container and arg(container, "--lease") is None
    assert arg(container, "--audit-key-file") is None  # the data volume's audit.key, as before
    assert not of_kind(docs, "PodDisruptionBudget") and "topologySpreadConstraints" not in pod
    assert pod["terminationGracePeriodSeconds"] == 60
    (claim,) = of_kind(docs, "PersistentVolumeClaim")
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert kube_settings(docs)["owner_identity"] == "rel-airlock"
    assert not of_kind(docs, "Cluster")


def test_an_audit_key_secret_applies_to_sqlite_too() -> None:
    docs = objects(render(sets=("controller.auditKey.existingSecret=mine",)))
    _, pod, container = controller(docs)
    assert arg(container, "--audit-key-file") == "/var/run/airlock/audit-key/audit.key"
    assert [v["secret"]["secretName"] for v in pod["volumes"] if v["name"] == "audit-key"] == ["mine"]
    assert "env" not in container and of_kind(docs, "PersistentVolumeClaim")


def refused(*sets: str) -> str:
    done = helm("template", "rel", str(CHART), *(a for s in sets for a in ("--set", s)), check=False)
    assert done.returncode != 0, f"helm accepted {sets}"
    return " ".join(done.stderr.split())


def test_several_replicas_without_postgres_are_refused_by_the_schema() -> None:
    message = refused("controller.replicas=2")
    assert "controller.replicas > 1: store.postgres (existingSecret or cloudnativepg.enabled;" in message
    assert "SQLite on a ReadWriteOncePod volume serves one controller) is required" in message
    assert "controller.replicas: Must be less than or equal to 1" in message


@pytest.mark.parametrize(
    ("sets", "where"),
    [
        (("controller.replicas=0",), "controller.replicas"),
        (("store.lease=0",), "store.lease"),
        (("store.postgres.key=",), "store.postgres.key"),
        (("store.postgres.dsn=postgresql://x",), "store.postgres"),  # never inline
        (("store.postgres.cloudnativepg.enabled=true", "store.postgres.cloudnativepg.instances=0"),
         "store.postgres.cloudnativepg.instances"),
        (("controller.auditKey.key=",), "controller.auditKey.key"),
    ],
)  # fmt: skip
def test_bad_store_settings_are_refused(sets: tuple[str, ...], where: str) -> None:
    assert where in refused(*sets)


#: The fields of CloudNativePG's Cluster (postgresql.cnpg.io/v1) the chart sets, as its CRD
#: declares them (cloudnative-pg config/crd/bases/postgresql.cnpg.io_clusters.yaml): nothing else.
CNPG_CLUSTER = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "postgresql.cnpg.io/v1"},
        "kind": {"const": "Cluster"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {"name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?$"}},
        },
        "spec": {
            "type": "object",
            "required": ["instances", "storage"],
            "additionalProperties": False,
            "properties": {
                "instances": {"type": "integer", "minimum": 1},
                "imageName": {"type": "string"},
                "bootstrap": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "initdb": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {"database": {"type": "string"}, "owner": {"type": "string"}},
                        }
                    },
                },
                "storage": {
                    "type": "object",
                    "required": ["size"],
                    "additionalProperties": False,
                    "properties": {"size": {"type": "string"}, "storageClass": {"type": "string"}},
                },
            },
        },
    },
}


def test_a_cloudnativepg_cluster_is_rendered_and_its_app_secret_read() -> None:
    docs = objects(render(sets=(*CNPG, "store.postgres.cloudnativepg.storageClass=fast")))
    (cluster,) = of_kind(docs, "Cluster")
    jsonschema.validate(cluster, CNPG_CLUSTER)
    assert cluster["metadata"] == {**cluster["metadata"], "name": "rel-airlock-pg", "namespace": "airlock"}
    assert cluster["spec"]["instances"] == 3
    assert cluster["spec"]["storage"] == {"size": "5Gi", "storageClass": "fast"}
    assert cluster["spec"]["bootstrap"] == {"initdb": {"database": "airlock", "owner": "airlock"}}
    # CNPG writes <cluster>-app with the DSN under uri: the controller reads exactly that.
    _, _, container = controller(docs)
    ref = container["env"][0]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "rel-airlock-pg-app", "key": "uri"}
    for obj in docs:
        if obj["kind"] != "Cluster":  # kubernetes-validate has no CRD schemas
            kubernetes_validate.validate(obj, LATEST, strict=True)


def test_cloudnativepg_settings_and_an_explicit_secret() -> None:
    sets = (*CNPG, "store.postgres.cloudnativepg.instances=1", "store.postgres.cloudnativepg.imageName=pg:16",
            "store.postgres.existingSecret=own", "store.postgres.key=k")  # fmt: skip
    docs = objects(render(sets=sets))
    (cluster,) = of_kind(docs, "Cluster")
    jsonschema.validate(cluster, CNPG_CLUSTER)
    assert cluster["spec"]["instances"] == 1 and cluster["spec"]["imageName"] == "pg:16"
    assert "storageClass" not in cluster["spec"]["storage"]
    _, _, container = controller(docs)
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "own", "key": "k"}


def test_the_check_refuses_what_the_crd_would() -> None:
    """The structural check above is not vacuous: a misspelt field fails it."""
    docs = objects(render(sets=CNPG))
    (cluster,) = of_kind(docs, "Cluster")
    cluster["spec"]["storage"]["sizee"] = cluster["spec"]["storage"].pop("size")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(cluster, CNPG_CLUSTER)


def test_the_notes_name_the_store_and_the_replicas() -> None:
    from tests.support.helm import render_notes

    notes = " ".join(render_notes(sets=CNPG).split())
    assert "The job store is PostgreSQL (the DSN from Secret rel-airlock-pg-app, key uri" in notes
    assert "shared by 2 controller replica(s)" in notes
    assert "controller.auditKey.existingSecret" in notes
    assert "StorageClass" not in notes  # no claim with PostgreSQL


def test_workspace_snapshots_go_where_every_replica_reaches_them() -> None:
    container = controller(objects(render(REPLICAS)))[2]
    assert arg(container, "--blob-store") == "s3://airlock-workspaces/prod"
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"] == {
        "name": "airlock-s3",
        "key": "AWS_ACCESS_KEY_ID",
    }
    assert arg(controller(objects(render()))[2], "--blob-store") == "dir"
    message = refused("store.postgres.existingSecret=db")
    assert (
        "workspaces.store dir with store.postgres: use s3 (or off); the replicas share no volume" in message
    )
    assert "workspaces.s3.bucket" in refused("workspaces.store=s3")
    assert "workspaces.store" in refused("workspaces.store=nfs")
