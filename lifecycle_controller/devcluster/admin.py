"""Admin requests and least-privilege identities on the local control plane.

A tiny synchronous HTTPS client (:func:`json_request`) and :class:`AdminAccess`, the part of
:class:`~lifecycle_controller.devcluster.controlplane.ControlPlane` that talks to a running
kube-apiserver as the cluster admin: raw requests, server-side apply, RBAC grants, and
kubeconfigs for certificate users and ServiceAccount tokens.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.machinery.tls import CertificateAuthority

__all__ = [
    "AdminAccess",
    "ApiResponse",
    "ControlPlaneError",
    "PolicyRule",
    "base64_text",
    "json_request",
]

PolicyRule = Mapping[str, Any]


class ControlPlaneError(RuntimeError):
    """The control plane failed to start; the message names the component and its log."""


@dataclass(frozen=True)
class ApiResponse:
    """Status and decoded JSON body of an admin request."""

    status: int
    body: dict[str, Any]


def json_request(
    host: str,
    port: int,
    context: ssl.SSLContext,
    method: str,
    path: str,
    body: Mapping[str, Any] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    content_type: str = "application/json",
    timeout: float = 30.0,
) -> ApiResponse:
    """One synchronous HTTPS request with a JSON body; the status and the decoded answer."""
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
    try:
        sent = {"Accept": "application/json", **(headers or {})}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            sent["Content-Type"] = content_type
        connection.request(method, path, body=payload, headers=sent)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    try:
        decoded = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        decoded = {"raw": raw.decode(errors="replace")}
    return ApiResponse(response.status, decoded if isinstance(decoded, dict) else {})


def base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode()


class AdminAccess:
    """Admin access to a running control plane (mixed into ``ControlPlane``).

    Needs the apiserver's ``port``, the ``workdir`` kubeconfigs are written to, the ``pki_dir``
    holding the CA and the admin's client certificate, and the CA that issues identities.
    """

    port: int
    workdir: Path
    pki_dir: Path
    _ca: CertificateAuthority

    @property
    def server(self) -> str:
        """The apiserver URL."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.pki_dir / "ca.crt"

    # ------------------------------------------------------------------ access

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        return context

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> ApiResponse:
        """Send one request as the cluster admin and return the status and JSON body."""
        return json_request(
            "127.0.0.1",
            self.port,
            self._ssl_context(),
            method,
            path,
            body,
            content_type=content_type,
            timeout=timeout,
        )

    def apply(self, manifest: Mapping[str, Any], *, path: str) -> ApiResponse:
        """Server-side apply ``manifest`` at the object ``path`` as the admin; raise on failure."""
        response = self.request(
            "PATCH",
            f"{path}?fieldManager=lifecycle-devcluster&force=true",
            manifest,
            content_type="application/apply-patch+yaml",
        )
        if response.status >= 300:
            raise ControlPlaneError(f"apply {path} failed ({response.status}): {response.body}")
        return response

    def _write_kubeconfig(self, path: Path, *, user: str, credentials: Mapping[str, str]) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "devcluster",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": base64_text(self._ca.cert_pem),
                    },
                }
            ],
            "users": [{"name": user, "user": dict(credentials)}],
            "contexts": [{"name": user, "context": {"cluster": "devcluster", "user": user}}],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # ------------------------------------------------------------------ identities

    def grant(
        self,
        subject: Mapping[str, str],
        *,
        name: str,
        cluster_rules: Iterable[PolicyRule] = (),
        namespaced_rules: Mapping[str, Iterable[PolicyRule]] | None = None,
    ) -> None:
        """Bind RBAC rules to ``subject`` (an RBAC subject dict): cluster-wide and per namespace."""
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        rules = list(cluster_rules)
        if rules:
            self.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": name},
                    "rules": rules,
                },
                path=f"{rbac}/clusterroles/{name}",
            )
            self.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": name},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": name,
                    },
                    "subjects": [dict(subject)],
                },
                path=f"{rbac}/clusterrolebindings/{name}",
            )
        for namespace, ns_rules in (namespaced_rules or {}).items():
            self.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": namespace},
                    "rules": list(ns_rules),
                },
                path=f"{rbac}/namespaces/{namespace}/roles/{name}",
            )
            self.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": namespace},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": name,
                    },
                    "subjects": [dict(subject)],
                },
                path=f"{rbac}/namespaces/{namespace}/rolebindings/{name}",
            )

    def user_kubeconfig(
        self,
        user: str,
        *,
        groups: Sequence[str] = (),
        cluster_rules: Iterable[PolicyRule] = (),
        namespaced_rules: Mapping[str, Iterable[PolicyRule]] | None = None,
    ) -> Path:
        """A non-admin identity authenticated by a client certificate, with the given RBAC.

        The certificate's CN is the user name and each group becomes an O entry.
        """
        pair = self._ca.issue(user, organizations=tuple(groups))
        self.grant(
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user},
            name=f"devcluster:{user}",
            cluster_rules=cluster_rules,
            namespaced_rules=namespaced_rules,
        )
        return self._write_kubeconfig(
            self.workdir / f"user-{user}.kubeconfig",
            user=user,
            credentials={
                "client-certificate-data": base64_text(pair.cert_pem),
                "client-key-data": base64_text(pair.key_pem),
            },
        )

    def service_account_kubeconfig(
        self, namespace: str, name: str, *, expiration_seconds: int = 7200
    ) -> Path:
        """A kubeconfig with a bound token for the ServiceAccount (created if missing).

        RBAC for it comes from elsewhere (for example the Helm chart's rendered roles).
        """
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace},
            },
            path=f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
        )
        response = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        if response.status != 201:
            raise ControlPlaneError(f"token request failed ({response.status}): {response.body}")
        token = str(response.body["status"]["token"])
        return self._write_kubeconfig(
            self.workdir / f"sa-{namespace}-{name}.kubeconfig",
            user=f"system:serviceaccount:{namespace}:{name}",
            credentials={"token": token},
        )
