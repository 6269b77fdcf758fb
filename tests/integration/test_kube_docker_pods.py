"""DockerPods runs stand-in Kubernetes pods on the real Docker engine, as a kubelet would.

Pods are driven through the PodRuntime protocol (and once through the stand-in API server
with the official client): init containers and volumes, Secrets as files and environment,
the security context and limits, the pod's IP and logs, failures (OOM, deadline, missing
image or Secret, unsupported specs), and that deleting or closing leaves no Docker object.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.images import runner_image_tag
from airlock.runner._client import RemoteTurn
from airlock.sandbox.kubernetes._runner_tls import RUNNER_NAME, RunnerCertificate
from airlock.testing import DockerPods, KubeApiStandIn, scripted_agent, text_step
from airlock.testing._kube_docker import LABEL_POD, LABEL_RUNTIME
from layer0 import TurnInput

pytestmark = pytest.mark.docker

PYTHON = "/opt/venv/bin/python"
NOBODY = 65534
GOLDEN = Path(__file__).parents[1] / "unit" / "sandbox" / "kubernetes_backend" / "golden"
HARDENED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}


# --- helpers -------------------------------------------------------------------------------


class Events:
    """An EventRecorder that keeps what it is given."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, kind: str, reason: str, message: str) -> None:
        with self._lock:
            self.recorded.append((kind, reason, message))

    def reasons(self, kind: str | None = None) -> list[str]:
        with self._lock:
            return [r for k, r, _ in self.recorded if kind is None or k == kind]

    def message(self, reason: str) -> str:
        with self._lock:
            return next(m for _, r, m in self.recorded if r == reason)


def make_pod(name: str, spec: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()), "resourceVersion": "1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def reader(secrets: Mapping[str, Mapping[str, bytes]]) -> Callable[[str], Mapping[str, bytes] | None]:
    return lambda name: secrets.get(name)


def until(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """``condition()``'s first truthy value, polled every 50 ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def phase_is(runtime: DockerPods, pod: dict[str, Any], *phases: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        status = runtime.status(pod)
        return status if status["phase"] in phases else None

    return check


def container(status: dict[str, Any], name: str) -> dict[str, Any]:
    found = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return next(c for c in found if c["name"] == name)


def labelled(client: Any, label: str) -> list[str]:
    """Names of the containers, volumes and networks carrying ``label``."""
    found = [c.name for c in client.containers.list(all=True, filters={"label": label})]
    found += [v.name for v in client.volumes.list(filters={"label": label})]
    found += [n.name for n in client.networks.list(filters={"label": label})]
    return found


def log_text(runtime: DockerPods, pod: dict[str, Any], name: str, tail: int | None = None) -> str:
    return b"".join(runtime.logs(pod, name, follow=False, tail_lines=tail)).decode()


@pytest.fixture(scope="module")
def image(docker_client: Any) -> str:
    tag = runner_image_tag()
    if not docker_client.images.list(name=tag):
        pytest.fail(f"the runner image {tag} is not built (airlock images build)")
    return tag


@pytest.fixture
def pods(docker_client: Any) -> Iterator[DockerPods]:
    runtime = DockerPods(runtime_handlers={"plain": "runc"})
    try:
        yield runtime
    finally:
        runtime.close()
        assert labelled(docker_client, f"{LABEL_RUNTIME}={runtime.id}") == []


# --- volumes, Secrets, security --------------------------------------------------------------

COPY_TOKEN = """
import os
with open("/secret/token", "rb") as src:
    token = src.read()
fd = os.open("/shared/token", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
os.write(fd, token)
os.close(fd)
"""

PROBE = """
import json, os
def st(path):
    s = os.stat(path)
    return [oct(s.st_mode & 0o7777), s.st_uid, s.st_gid]
try:
    open("/probe", "w")
    root = "writable"
except OSError as e:
    root = e.errno
lines = open("/proc/self/status").read().splitlines()
status = dict(line.split(":\\t", 1) for line in lines if ":\\t" in line)
print(json.dumps({
    "ids": [os.getuid(), os.getgid(), sorted(os.getgroups())],
    "token": open("/shared/token").read(),
    "shared_token": st("/shared/token"),
    "secret_token": st("/secret/token"),
    "secret_dir": st("/secret"),
    "nested": st("/secret/nested/key"),
    "cred": [open("/etc/cred.txt").read(), *st("/etc/cred.txt")],
    "root": root,
    "shared_mount": [m for m in open("/proc/mounts").read().splitlines() if " /shared " in m],
    "cap_eff": status["CapEff"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "env": [os.environ.get("API_KEY"), os.environ.get("GREETING"), os.environ.get("POD")],
}))
"""


def test_an_init_container_hands_a_secret_to_the_hardened_main_container(
    pods: DockerPods, image: str, docker_client: Any
) -> None:
    """The init container copies the token through a Memory emptyDir; the main container,
    non-root with a read-only root, no capabilities and no-new-privileges, reads it, the
    Secret's files (modes, fsGroup ownership, a subPath file) and its secretKeyRef env."""
    secrets = {"creds": {"token": b"tok-123", "api-key": b"key-456"}}
    spec = {
        "restartPolicy": "Never",
        "runtimeClassName": "plain",
        "securityContext": {
            "runAsUser": NOBODY,
            "runAsGroup": NOBODY,
            "runAsNonRoot": True,
            "fsGroup": NOBODY,
        },
        "initContainers": [
            {
                "name": "copy",
                "image": image,
                "command": [PYTHON, "-c", COPY_TOKEN],
                "securityContext": HARDENED,
                "volumeMounts": [
                    {"name": "token", "mountPath": "/secret", "readOnly": True},
                    {"name": "shared", "mountPath": "/shared"},
                ],
            }
        ],
        "containers": [
            {
                "name": "main",
                "image": image,
                "command": [PYTHON, "-c"],
                "args": [PROBE],
                "env": [
                    {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "api-key"}}},
                    {"name": "GREETING", "value": "hi $(API_KEY) $$(API_KEY)"},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                "securityContext": HARDENED,
                "volumeMounts": [
                    {"name": "shared", "mountPath": "/shared"},
                    {"name": "token", "mountPath": "/secret"},
                    {"name": "everything", "mountPath": "/etc/cred.txt", "subPath": "api-key"},
                ],
            }
        ],
        "volumes": [
            {"name": "shared", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            {
                "name": "token",
                "secret": {
                    "secretName": "creds",
                    "defaultMode": 0o400,
                    "items": [
                        {"key": "token", "path": "token"},
                        {"key": "api-key", "path": "nested/key", "mode": 0o600},
                    ],
                },
            },
            {"name": "everything", "secret": {"secretName": "creds"}},
        ],
    }
    pod = make_pod("handover", spec)
    events = Events()
    pods.start(pod, reader(secrets), events)
    status = until(phase_is(pods, pod, "Succeeded", "Failed"), what="the pod to end")

    assert status["phase"] == "Succeeded", (status, events.recorded, log_text(pods, pod, "main"))
    assert container(status, "copy")["state"]["terminated"]["reason"] == "Completed"
    assert container(status, "main")["state"]["terminated"]["exitCode"] == 0
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Initialized"] == "True" and conditions["PodScheduled"] == "True"
    assert events.reasons("Normal")[:5] == ["Scheduled", "Pulled", "Created", "Started", "Created"]
    assert "Started container main" in [m for _, _, m in events.recorded]

    seen = json.loads(log_text(pods, pod, "main"))
    assert seen["ids"][:2] == [NOBODY, NOBODY] and NOBODY in seen["ids"][2]
    assert seen["token"] == "tok-123"
    assert seen["shared_token"] == [oct(0o400), NOBODY, NOBODY]  # written by the init container, setgid dir
    # The kubelet's fsGroup handling: root-owned, group fsGroup, group-readable; directories setgid.
    assert seen["secret_token"] == [oct(0o440), 0, NOBODY]
    assert seen["nested"] == [oct(0o640), 0, NOBODY]
    assert seen["secret_dir"] == [oct(0o2755), 0, NOBODY]
    assert seen["cred"] == ["key-456", oct(0o644), 0, NOBODY]
    assert seen["root"] == 30  # EROFS: the root filesystem is read-only
    assert len(seen["shared_mount"]) == 1 and seen["shared_mount"][0].startswith("tmpfs /shared tmpfs")
    assert "size=1024k" in seen["shared_mount"][0]
    assert seen["cap_eff"] == "0000000000000000"
    assert seen["no_new_privs"] == "1"
    assert seen["env"] == ["key-456", "hi key-456 $(API_KEY)", "handover"]

    main = docker_client.containers.get(container(status, "main")["containerID"].removeprefix("docker://"))
    host = main.attrs["HostConfig"]
    assert host["Runtime"] == "runc"
    assert host["Memory"] == host["MemorySwap"] == 128 * 2**20
    assert host["NanoCpus"] == 500_000_000
    assert main.labels[LABEL_POD] == pod["metadata"]["uid"]


# --- the pod network and logs ----------------------------------------------------------------

SERVE = """
import os
with open("/data/hello.txt", "w") as f:
    f.write("hello from the pod")
os.execv("/opt/venv/bin/python", ["python", "-m", "http.server", "8080", "-d", "/data"])
"""

FETCH_LOCALLY = """
import time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8080/hello.txt", timeout=1).read().decode())
        break
    except OSError:
        time.sleep(0.1)
"""


def test_a_pod_serves_on_its_ip_and_its_logs_follow_until_it_is_deleted(
    pods: DockerPods, image: str, docker_client: Any
) -> None:
    """A server in the pod answers on podIP from this host; a second container reaches it
    on localhost (one network namespace); logs (whole, tailed, followed) come from Docker;
    delete ends the followed log and removes every Docker object and file of the pod."""
    spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsUser": NOBODY, "runAsGroup": NOBODY},
        "containers": [
            {
                "name": "web",
                "image": image,
                "command": [PYTHON, "-c", SERVE],
                "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            },
            {"name": "neighbour", "image": image, "command": [PYTHON, "-c", FETCH_LOCALLY]},
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],  # on disk: a local volume the user can write
    }
    pod = make_pod("web", spec)
    uid = pod["metadata"]["uid"]
    pods.start(pod, reader({}), Events())
    status = until(
        lambda: (s := pods.status(pod)).get("podIP") and "running" in container(s, "web")["state"] and s,
        what="the server to run",
    )
    assert status["phase"] == "Running"

    def fetch() -> bytes:
        try:
            with pods.connect(pod, 8080) as sock:
                sock.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
                return b"".join(iter(lambda: sock.recv(4096), b""))
        except OSError:
            return b""

    assert until(fetch, what="the server to answer").endswith(b"hello from the pod")
    assert "hello from the pod" in until(lambda: log_text(pods, pod, "neighbour"), what="the neighbour")
    log = until(
        lambda: "GET /hello.txt" in (text := log_text(pods, pod, "web")) and text, what="the access log"
    )
    assert log_text(pods, pod, "web", tail=1) == log.splitlines(keepends=True)[-1]
    assert log_text(pods, pod, "web", tail=0) == ""

    followed: list[bytes] = []

    def follow() -> None:
        for chunk in pods.logs(pod, "web", follow=True, tail_lines=None):
            followed.append(chunk)

    follower = threading.Thread(target=follow)
    follower.start()
    until(lambda: b"GET /hello.txt" in b"".join(followed), what="the followed log")
    until(lambda: b"" in followed, what="a heartbeat while nothing new comes")
    assert labelled(docker_client, f"{LABEL_POD}={uid}")
    pods.delete(pod)
    follower.join(10)
    assert not follower.is_alive()
    assert labelled(docker_client, f"{LABEL_POD}={uid}") == []
    pods.delete(pod)  # idempotent
    assert pods.status(pod)["phase"] == "Pending"  # no longer known


# --- failures --------------------------------------------------------------------------------


def test_a_container_past_its_memory_limit_is_oom_killed(pods: DockerPods, image: str) -> None:
    spec = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "hog",
                "image": image,
                "command": [PYTHON, "-c", "chunks = []\nwhile True: chunks.append(b'x' * 2**20)"],
                "resources": {"limits": {"memory": "32Mi"}},
            }
        ],
    }
    pod = make_pod("hog", spec)
    events = Events()
    pods.start(pod, reader({}), events)
    status = until(phase_is(pods, pod, "Failed", "Succeeded"), what="the hog to end")
    assert status["phase"] == "Failed"
    terminated = container(status, "hog")["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
    assert until(lambda: "OOMKilling" in events.reasons("Warning"), what="the OOMKilling event")


def test_active_deadline_seconds_kills_the_pod(pods: DockerPods, image: str) -> None:
    spec = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": 2,
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "sleeper", "image": image, "command": [PYTHON, "-c", "import time; time.sleep(60)"]}
        ],
    }
    pod = make_pod("sleeper", spec)
    events = Events()
    started = time.monotonic()
    pods.start(pod, reader({}), events)
    until(phase_is(pods, pod, "Running"), what="the sleeper to run")
    status = until(
        lambda: (
            (s := pods.status(pod))["phase"] == "Failed"
            and "terminated" in container(s, "sleeper")["state"]
            and s
        ),
        timeout=15,
        what="the deadline",
    )
    assert 2 <= time.monotonic() - started < 10
    assert status["reason"] == "DeadlineExceeded"
    assert "DeadlineExceeded" in events.reasons("Warning")
    assert "Killing" in events.reasons("Normal")


def test_a_missing_image_is_never_pulled(pods: DockerPods, docker_client: Any) -> None:
    image = f"airlock-absent-{uuid.uuid4().hex[:8]}:never"
    pod = make_pod("absent", {"containers": [{"name": "main", "image": image}]})
    events = Events()
    pods.start(pod, reader({}), events)
    status = until(
        lambda: (s := pods.status(pod)) and "ErrImageNeverPull" in str(container(s, "main")["state"]) and s,
        what="ErrImageNeverPull",
    )
    assert status["phase"] == "Pending"
    assert container(status, "main")["state"]["waiting"]["message"] == (
        f'Container image "{image}" is not present with pull policy of Never'
    )
    assert "ErrImageNeverPull" in events.reasons("Warning")
    assert [
        c.name
        for c in docker_client.containers.list(
            all=True, filters={"label": f"{LABEL_POD}={pod['metadata']['uid']}"}
        )
    ] == []


def test_a_missing_secret_waits_until_it_exists(pods: DockerPods, image: str) -> None:
    """CreateContainerConfigError while the Secret is missing; retried (as the kubelet does)
    until it appears, then the container runs with its value."""
    secrets: dict[str, dict[str, bytes]] = {}
    env = [{"name": "LATE", "valueFrom": {"secretKeyRef": {"name": "later", "key": "value"}}}]
    command = [PYTHON, "-c", "import os; print(os.environ['LATE'])"]
    pod = make_pod("late", {"containers": [{"name": "main", "image": image, "command": command, "env": env}]})
    events = Events()
    pods.start(pod, reader(secrets), events)
    waiting = until(
        lambda: (
            (s := pods.status(pod))
            and container(s, "main")["state"].get("waiting", {}).get("reason") == "CreateContainerConfigError"
            and s
        ),
        what="CreateContainerConfigError",
    )
    assert waiting["phase"] == "Pending"
    assert container(waiting, "main")["state"]["waiting"]["message"] == 'secret "later" not found'
    assert events.message("Failed") == 'Error: secret "later" not found'
    secrets["later"] = {"value": b"arrived"}
    status = until(phase_is(pods, pod, "Succeeded", "Failed"), what="the pod to run")
    assert status["phase"] == "Succeeded"
    assert log_text(pods, pod, "main") == "arrived\n"


def test_a_failing_init_container_fails_the_pod(pods: DockerPods, image: str, docker_client: Any) -> None:
    spec = {
        "initContainers": [
            {"name": "setup", "image": image, "command": [PYTHON, "-c", "raise SystemExit(3)"]}
        ],
        "containers": [{"name": "main", "image": image, "command": [PYTHON, "-c", "print('never')"]}],
    }
    pod = make_pod("bad-init", spec)
    pods.start(pod, reader({}), Events())
    status = until(phase_is(pods, pod, "Failed"), what="the pod to fail")
    assert container(status, "setup")["state"]["terminated"] | {"startedAt": None, "finishedAt": None} == {
        "exitCode": 3,
        "reason": "Error",
        "startedAt": None,
        "finishedAt": None,
        "containerID": container(status, "setup")["containerID"],
    }
    assert container(status, "main")["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert {c["type"]: c["status"] for c in status["conditions"]}["Initialized"] == "False"
    uid = pod["metadata"]["uid"]
    names = [c.name for c in docker_client.containers.list(all=True, filters={"label": f"{LABEL_POD}={uid}"})]
    assert len(names) == 1 and names[0].startswith("k8s_setup_")


@pytest.mark.parametrize(
    ("extra", "reason", "needle"),
    [
        ({"volumes": [{"name": "host", "hostPath": {"path": "/etc"}}]}, "FailedMount", "hostPath volumes"),
        ({"runtimeClassName": "gvisor"}, "FailedCreatePodSandBox", 'RuntimeClass "gvisor"'),
        ({"hostNetwork": True}, "FailedCreatePodSandBox", "hostNetwork"),
    ],
)
def test_what_the_stand_in_cannot_run_fails_the_pod_with_a_warning(
    pods: DockerPods, image: str, extra: dict[str, Any], reason: str, needle: str
) -> None:
    pod = make_pod("unsupported", {"containers": [{"name": "main", "image": image}], **extra})
    events = Events()
    pods.start(pod, reader({}), events)
    status = until(phase_is(pods, pod, "Failed"), what="the pod to fail")
    assert needle in status["message"]
    assert reason in events.reasons("Warning") and needle in events.message(reason)


def test_a_pod_asking_for_a_gpu_is_unschedulable(pods: DockerPods) -> None:
    pod = _golden_sandbox_pod("gvisor_gpu_disk.yaml", "unused:image")
    events = Events()
    pods.start(pod, reader({}), events)
    until(lambda: "FailedScheduling" in events.reasons("Warning"), what="FailedScheduling")
    status = pods.status(pod)
    assert status["phase"] == "Pending"
    assert status["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "lastTransitionTime": status["conditions"][0]["lastTransitionTime"],
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
        }
    ]


# --- the backend's own pods ------------------------------------------------------------------


def _golden(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((GOLDEN / name).read_text()) if d]


def _golden_sandbox_pod(name: str, image: str) -> dict[str, Any]:
    pod = next(
        d
        for d in _golden(name)
        if d["kind"] == "Pod" and d["metadata"]["labels"]["airlock.dev/role"] == "sandbox"
    )
    for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
        c["image"] = image
    pod["metadata"]["uid"] = str(uuid.uuid4())
    pod["metadata"]["resourceVersion"] = "1"
    return pod


def test_the_rendered_sandbox_pod_runs_a_job_over_grpc(pods: DockerPods, image: str) -> None:
    """The Kubernetes backend's sandbox pod (golden, with file and env credentials) runs as
    rendered: its runner takes the token from the Secret and completes a turn over gRPC on podIP,
    TLS pinned to the certificate in its Secret."""
    documents = _golden("env_file_credentials.yaml")
    secret = next(
        d
        for d in documents
        if d["kind"] == "Secret" and d["metadata"]["labels"]["airlock.dev/role"] == "sandbox"
    )
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    # The golden Secret holds a stand-in certificate: a real one, pinned as the backend pins it.
    certificate = RunnerCertificate.generate()
    data.update({"tls.crt": certificate.cert_pem, "tls.key": certificate.key_pem})
    pod = _golden_sandbox_pod("env_file_credentials.yaml", image)
    events = Events()
    pods.start(pod, reader({secret["metadata"]["name"]: data}), events)
    # Generous bounds (hang guards, not timings): under random order this can follow a sandbox
    # the host is still tearing down.
    status = until(
        lambda: (s := pods.status(pod))["phase"] != "Pending" and s, 60, what="the sandbox pod to run"
    )
    assert status["phase"] == "Running", (status, events.recorded)
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"

    async def job() -> str:
        spec = scripted_agent([text_step("done in the pod")])
        pinned = {"root_certificates": certificate.cert_pem, "tls_server_name": RUNNER_NAME}
        async with RemoteTurn(f"{status['podIP']}:50051", data["token"].decode(), spec, **pinned) as turn:
            await turn.wait_until_serving(timeout=60)
            output = await turn.execute(TurnInput.new("go"))
        return output.message.as_text()

    try:
        answer = asyncio.run(job())
    except Exception as e:
        log = log_text(pods, pod, "runner", 20)
        raise AssertionError(f"{e}; the pod: {pods.status(pod)}; its log: {log}") from e
    assert answer == "done in the pod"


def test_through_the_stand_in_api_server_with_the_official_client(
    image: str, docker_client: Any, tmp_path: Path
) -> None:
    """The stand-in's pods run on Docker: created, read (status, log, events) and deleted
    through the official client."""
    from kubernetes import client, config

    runtime = DockerPods()
    try:
        with KubeApiStandIn(pods=runtime, namespaces=("jobs",)) as api:
            api_client = config.new_client_from_config(
                config_file=str(api.write_kubeconfig(tmp_path / "kubeconfig"))
            )
            core = client.CoreV1Api(api_client)
            core.create_namespaced_secret(
                "jobs",
                {
                    "metadata": {"name": "greeting"},
                    "data": {"text": base64.b64encode(b"hello, cluster").decode()},
                },
            )
            env = [{"name": "TEXT", "valueFrom": {"secretKeyRef": {"name": "greeting", "key": "text"}}}]
            body = {
                "metadata": {"name": "hello"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "command": [PYTHON, "-c", "import os; print(os.environ['TEXT'])"],
                            "env": env,
                        }
                    ],
                },
            }
            core.create_namespaced_pod("jobs", body)
            until(
                lambda: core.read_namespaced_pod("hello", "jobs").status.phase == "Succeeded",
                what="Succeeded",
            )
            assert core.read_namespaced_pod_log("hello", "jobs", container="main") == "hello, cluster\n"
            reasons = [e.reason for e in core.list_namespaced_event("jobs").items]
            assert {"Scheduled", "Pulled", "Created", "Started"} <= set(reasons)
            uid = core.read_namespaced_pod("hello", "jobs").metadata.uid
            assert labelled(docker_client, f"{LABEL_POD}={uid}")
            core.delete_namespaced_pod("hello", "jobs")
            assert [p.metadata.name for p in core.list_namespaced_pod("jobs").items] == []
            # Deleting the pod through the API removed its Docker objects at once.
            assert labelled(docker_client, f"{LABEL_POD}={uid}") == []
    finally:
        runtime.close()
    assert labelled(docker_client, f"{LABEL_RUNTIME}={runtime.id}") == []
