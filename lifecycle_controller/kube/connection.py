"""Cluster credentials: where the API server is and how to authenticate, without heavy imports.

kubernetes-asyncio's loaders import ``kubernetes_asyncio.client``, which imports every
generated API model (about 0.3 s and 50 MB before the first request; see
docs/architecture.md#raw-requests). The common cases are read here directly: in-cluster
service-account credentials, and a kubeconfig whose user has a client certificate, a token
or a token file. Anything else (``exec`` plugins, ``auth-provider``, basic auth, proxies,
several kubeconfig files to merge) is handed to kubernetes-asyncio's own loader, imported
only then, so every kubeconfig it accepted is still accepted.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifecycle_controller.kube.errors import KubeError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_NAMESPACE_FILE = SERVICE_ACCOUNT_DIR / "namespace"
TOKEN_FILE_REREAD_SECONDS = 60.0
"""A token file (bound service-account tokens rotate) is re-read at most this often."""

_SIMPLE_USER_KEYS = frozenset(
    {
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "token",
        "tokenFile",
    }
)
_SIMPLE_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "extensions",
    }
)

AuthorizationSource = Callable[[], Awaitable[str | None]]
"""Returns the ``Authorization`` header value for the next request, or None."""


class ConnectionConfigError(KubeError):
    """No usable cluster credentials: the flag, KUBECONFIG and in-cluster all failed."""


@dataclass
class ClusterConfig:
    """Where the API server is and how to talk to it (TLS material and the bearer token).

    Its ``repr`` (a log line, a traceback's locals) leaves the secrets out: the token, the
    client key and the proxy URL, which may carry a password.
    """

    host: str
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = field(default=None, repr=False)
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    authorization: AuthorizationSource | None = field(default=None, repr=False)
    """Overrides ``token``/``token_file`` (credentials kubernetes-asyncio refreshes itself)."""
    _file_token: tuple[float, str] | None = field(default=None, repr=False)

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS context for ``https`` hosts (True: default verification; plain HTTP too)."""
        if not self.host.startswith("https"):
            return True
        context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        elif self.cert_data is not None:
            _load_chain_from_memory(context, self.cert_data, self.key_data or self.cert_data)
        if not self.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def request_proxy(self) -> str | None:
        """The proxy for requests to the API server: the kubeconfig's ``proxy-url``, else the
        environment's (``HTTPS_PROXY``/``HTTP_PROXY``, not for hosts in ``NO_PROXY``), as
        client-go chooses it. Read once: aiohttp's ``trust_env`` would read the environment
        and ``~/.netrc`` again, in a thread, for every request."""
        if self.proxy:
            return self.proxy
        parts = urllib.parse.urlsplit(self.host)
        if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
            return None
        return urllib.request.getproxies().get(parts.scheme) or None

    async def authorization_header(self) -> str | None:
        if self.authorization is not None:
            return await self.authorization()
        if self.token_file:
            now = time.monotonic()
            cached = self._file_token
            if cached is None or now - cached[0] > TOKEN_FILE_REREAD_SECONDS:
                token = _read_token(self.token_file, cached[1] if cached else "")
                self._file_token = cached = (now, token)
            return f"Bearer {cached[1]}" if cached[1] else None
        return f"Bearer {self.token}" if self.token else None

    @classmethod
    def from_kubernetes_asyncio(cls, configuration: Any) -> ClusterConfig:
        """Adopt a ``kubernetes_asyncio.client.Configuration`` (read by attribute, no import)."""
        api_key = getattr(configuration, "api_key", None) or {}
        hook = getattr(configuration, "refresh_api_key_hook", None)

        async def authorization() -> str | None:
            value = await configuration.get_api_key_with_prefix("BearerToken")
            return str(value) if value else None

        return cls(
            host=str(configuration.host),
            ca_file=getattr(configuration, "ssl_ca_cert", None),
            cert_file=getattr(configuration, "cert_file", None),
            key_file=getattr(configuration, "key_file", None),
            verify_ssl=bool(getattr(configuration, "verify_ssl", True)),
            tls_server_name=getattr(configuration, "tls_server_name", None),
            proxy=getattr(configuration, "proxy", None),
            authorization=authorization if ("BearerToken" in api_key or hook) else None,
        )


def _read_token(path: str, previous: str) -> str:
    """A token file's content (tiny, a local file); the previous token if it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return previous


def _load_chain_from_memory(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """``load_cert_chain`` reads files only: write the PEM to a private file, load, remove."""
    fd, name = tempfile.mkstemp(prefix="lifecycle-client-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(cert.rstrip(b"\n") + b"\n" + key)
        context.load_cert_chain(name)
    finally:
        os.unlink(name)


def pod_namespace() -> str:
    """The namespace the controller's Pod runs in (for its Lease and its own Events)."""
    namespace = os.environ.get("POD_NAMESPACE", "")
    if not namespace and SERVICE_ACCOUNT_NAMESPACE_FILE.is_file():
        namespace = SERVICE_ACCOUNT_NAMESPACE_FILE.read_text().strip()
    return namespace or "default"


def kubeconfig_path(explicit: str | None, *, in_cluster_first: bool = False) -> str | None:
    """The kubeconfig to load, or None for in-cluster credentials; raises when nothing usable
    is configured.

    ``--kubeconfig``, then ``$KUBECONFIG``, then ~/.kube/config, then in-cluster: kubectl's
    order, so a tool run in a Pod (a debug shell, a CI job) acts as the user whose
    kubeconfig it was given, never silently as the Pod's ServiceAccount. The controller
    (``in_cluster_first``) takes its Pod's ServiceAccount before ~/.kube/config, as
    client-go controllers do.
    """
    chosen = explicit or os.environ.get("KUBECONFIG", "")
    if not chosen:
        in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        default = Path.home() / ".kube" / "config"
        if in_cluster and (in_cluster_first or not default.is_file()):
            return None
        if not default.is_file():
            raise ConnectionConfigError(
                "no cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a Pod"
            )
        return str(default)
    if not any(Path(part).is_file() for part in chosen.split(os.pathsep) if part):
        raise ConnectionConfigError(f"kubeconfig {chosen} not found")
    return chosen


def in_cluster_config() -> ClusterConfig:
    """The Pod's service-account credentials (what client-go's ``InClusterConfig`` reads)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    token_file = SERVICE_ACCOUNT_DIR / "token"
    ca_file = SERVICE_ACCOUNT_DIR / "ca.crt"
    if not host or not port:
        raise ConnectionConfigError(
            "in-cluster configuration failed: KUBERNETES_SERVICE_HOST/PORT are not set"
        )
    if not token_file.is_file() or not ca_file.is_file():
        raise ConnectionConfigError(
            f"in-cluster configuration failed: {token_file} or {ca_file} is missing"
        )
    if not token_file.read_text().strip():
        raise ConnectionConfigError(f"in-cluster configuration failed: {token_file} is empty")
    if ":" in host:
        host = f"[{host}]"
    return ClusterConfig(
        host=f"https://{host}:{port}", ca_file=str(ca_file), token_file=str(token_file)
    )


def _named(entries: Any, name: str, what: str, path: str) -> Mapping[str, Any]:
    for entry in entries or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(what)
            return value if isinstance(value, Mapping) else {}
    raise ConnectionConfigError(f"cannot load kubeconfig {path}: no {what} named {name!r}")


def _simple_kubeconfig(path: str, context: str | None) -> tuple[ClusterConfig, str] | None:
    """The kubeconfig read directly, or None when it needs kubernetes-asyncio's loader."""
    if os.pathsep in path:
        return None
    import yaml

    try:
        text = Path(path).read_text()
        document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as error:
        raise ConnectionConfigError(f"cannot load kubeconfig {path}: {error}") from error
    if not isinstance(document, Mapping):
        return None
    context_name = context or document.get("current-context")
    if not context_name:
        return None
    chosen = _named(document.get("contexts"), str(context_name), "context", path)
    cluster = _named(document.get("clusters"), str(chosen.get("cluster")), "cluster", path)
    user: Mapping[str, Any] = {}
    if chosen.get("user"):
        user = _named(document.get("users"), str(chosen["user"]), "user", path)
    if not set(user) <= _SIMPLE_USER_KEYS or not set(cluster) <= _SIMPLE_CLUSTER_KEYS:
        return None
    if not cluster.get("server"):
        raise ConnectionConfigError(f"cannot load kubeconfig {path}: the cluster has no server")
    base = Path(path).parent

    def file_of(key: str) -> str | None:
        value = user.get(key) if key in user else cluster.get(key)
        return str(base / str(value)) if value else None

    def data_of(source: Mapping[str, Any], key: str) -> bytes | None:
        value = source.get(key)
        try:
            return base64.b64decode(str(value)) if value else None
        except ValueError as error:
            raise ConnectionConfigError(f"cannot load kubeconfig {path}: {key}: {error}") from error

    ca_data = data_of(cluster, "certificate-authority-data")
    token_file = user.get("tokenFile")
    config = ClusterConfig(
        host=str(cluster["server"]).rstrip("/"),
        ca_file=None if ca_data else file_of("certificate-authority"),
        ca_data=ca_data.decode() if ca_data else None,
        cert_file=file_of("client-certificate"),
        key_file=file_of("client-key"),
        cert_data=data_of(user, "client-certificate-data"),
        key_data=data_of(user, "client-key-data"),
        verify_ssl=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name") or None,
        token=str(user["token"]) if user.get("token") else None,
        token_file=str(base / str(token_file)) if token_file and not user.get("token") else None,
    )
    try:
        config.ssl_context()  # bad certificates fail now, as kubernetes-asyncio's loader did
    except (ssl.SSLError, OSError, ValueError) as error:
        raise ConnectionConfigError(f"cannot load kubeconfig {path}: {error}") from error
    return config, str(chosen.get("namespace") or "default")


async def _kubernetes_asyncio_kubeconfig(
    path: str, context: str | None
) -> tuple[ClusterConfig, str]:
    """Everything else: kubernetes-asyncio's loader (exec plugins, auth providers, merges)."""
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config
    from kubernetes_asyncio.config.config_exception import ConfigException

    configuration = k8s_client.Configuration()
    try:
        loader = await k8s_config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError) as error:
        raise ConnectionConfigError(f"cannot load kubeconfig {path}: {error}") from error
    namespace = "default"
    with_context = getattr(loader, "current_context", None)
    if isinstance(with_context, Mapping):
        namespace = str(with_context.get("context", {}).get("namespace") or "default")
    return ClusterConfig.from_kubernetes_asyncio(configuration), namespace


async def load_configuration(
    kubeconfig: str | None = None, *, context: str | None = None, in_cluster_first: bool = False
) -> tuple[ClusterConfig, str]:
    """Credentials from ``--kubeconfig``, else ``$KUBECONFIG``, else ~/.kube/config, else
    in-cluster (with ``in_cluster_first``, in-cluster before ~/.kube/config: see
    :func:`kubeconfig_path`).

    Returns the configuration and the default namespace (the Pod's namespace in-cluster, the
    context's namespace or ``default`` otherwise).
    """
    path = kubeconfig_path(kubeconfig, in_cluster_first=in_cluster_first)
    if path is None:
        return in_cluster_config(), pod_namespace()
    simple = _simple_kubeconfig(path, context)
    if simple is not None:
        return simple
    return await _kubernetes_asyncio_kubeconfig(path, context)
