"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager.

Started the way controller-runtime's envtest does it, from binaries built by
:mod:`lifecycle_controller.devcluster.binaries`: free loopback ports, a temporary folder for
data, certificates, kubeconfigs and logs, RBAC authorization switched on. The integration
tests and the ``demo`` command share it. The API is synchronous (processes and a tiny admin
REST helper) so that it serves a pytest session fixture as well as a CLI command.

With ``audit_log=True`` the API server writes an audit log at ``Metadata`` level (every
request, stage ``ResponseComplete`` only) as JSON lines to :attr:`ControlPlane.audit_log`; the
fault tests count the controller's actions there (:meth:`ControlPlane.audit_events`). The fault
tests also kill and restart components: :meth:`ControlPlane.kill` and
:meth:`ControlPlane.restart` (same ports, same data, same certificates).

With ``nodes=N`` (opt-in; the default has no scheduler and no node, so Pods stay Pending) it
also runs kube-scheduler and kwok and creates N fake Nodes, on which Pods become Running and
Ready: :mod:`lifecycle_controller.devcluster.nodes`.

For large object sets (the benchmark's million ConfigMaps, written straight into etcd) two
etcd limits can be raised: ``etcd_quota_bytes`` (``--quota-backend-bytes``, 2 GiB by default,
past which etcd refuses every write) and ``etcd_max_txn_ops`` (``--max-txn-ops``, 128 puts per
transaction by default). :meth:`ControlPlane.pid` names a component's process, whose memory a
benchmark reads.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from lifecycle_controller.devcluster.admin import (
    AdminAccess,
    ControlPlaneError,
    base64_text,
    json_request,
)
from lifecycle_controller.devcluster.binaries import (
    ControlPlaneBinaries,
    Log,
    NodeBinaries,
    ensure_binaries,
    ensure_node_binaries,
)
from lifecycle_controller.devcluster.nodes import (
    FakeNodes,
    create_fake_nodes,
    fake_nodes_ready,
    kwok_argv,
    kwok_configuration,
    scheduler_argv,
)
from lifecycle_controller.devcluster.versions import KUBERNETES_VERSION
from lifecycle_controller.machinery.tls import CertificateAuthority, service_account_signing_key

CONTROLLERS = (
    "deployment",
    "replicaset",
    "statefulset",
    "daemonset",
    "namespace",
    "garbagecollector",
    "serviceaccount",
)
"""kube-controller-manager controllers needed for real rollouts and namespace deletion."""

NODE_CONTROLLERS = ("job",)
"""Added where fake nodes run Pods: a Job's Pods finish there (kwok), so Jobs complete."""

AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
"""
"""With ``audit_log=True``: every request at Metadata level, once, when its response started."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM the child if the Python process dies, so nothing is orphaned."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


class ControlPlane(AdminAccess):
    """etcd + kube-apiserver (+ kube-controller-manager) on loopback, in a temporary folder.

    Use as a context manager or call :meth:`start` and :meth:`stop`. With ``keep_dir`` the
    folder (data, certificates, logs) stays after :meth:`stop`; :meth:`stop` with
    ``keep_logs=True`` does the same for one stop.
    """

    def __init__(
        self,
        *,
        binaries: ControlPlaneBinaries | None = None,
        controller_manager: bool = True,
        workdir: Path | None = None,
        keep_dir: bool = False,
        log: Log = print,
        audit_log: bool = False,
        nodes: int | FakeNodes = 0,
        node_binaries: NodeBinaries | None = None,
        kubernetes: str = KUBERNETES_VERSION,
        etcd_quota_bytes: int | None = None,
        etcd_max_txn_ops: int | None = None,
    ) -> None:
        self.kubernetes = kubernetes
        self._etcd_limits = [
            *([f"--quota-backend-bytes={etcd_quota_bytes}"] if etcd_quota_bytes else []),
            *([f"--max-txn-ops={etcd_max_txn_ops}"] if etcd_max_txn_ops else []),
        ]
        """The pinned Kubernetes release whose binaries run (when ``binaries`` is not given)."""
        self._binaries = binaries
        self.nodes = nodes if isinstance(nodes, FakeNodes) else FakeNodes(nodes)
        #: kube-controller-manager's controllers (a Job completes only where Pods can run).
        self.controllers = CONTROLLERS + (NODE_CONTROLLERS if self.nodes.count else ())
        """The fake Nodes (none by default); with some, kube-scheduler and kwok run too."""
        self._node_binaries = node_binaries
        self._audit = audit_log
        self._argv: dict[str, list[str]] = {}
        self._with_controller_manager = controller_manager
        self._keep_dir = keep_dir
        self._log = log
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="lifecycle-devcluster-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs_dir = self.workdir / "logs"
        self.pki_dir = self.workdir / "pki"
        self._processes: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []
        self._ca = CertificateAuthority()
        self.port = 0
        self.etcd_url = ""
        """etcd's client URL once started (tests use it, e.g. to compact history)."""
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.audit_log = self.logs_dir / "audit.log"
        """The API server's audit log (JSON lines), written when ``audit_log=True``."""
        self.started_seconds = 0.0
        self._scheduler_port = 0

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(keep_logs=exc is not None)

    def start(self, *, timeout: float = 180.0) -> None:
        """Build or locate the binaries, start every component and wait until usable."""
        binaries = self._binaries or ensure_binaries(log=self._log, kubernetes=self.kubernetes)
        node_binaries = None
        if self.nodes.count:
            node_binaries = self._node_binaries or ensure_node_binaries(
                log=self._log, kubernetes=self.kubernetes
            )
        started = time.monotonic()
        self.logs_dir.mkdir(exist_ok=True)
        self.pki_dir.mkdir(exist_ok=True)
        try:
            etcd_url = self._start_etcd(binaries, deadline=started + timeout)
            self._start_apiserver(binaries, etcd_url, deadline=started + timeout)
            if self._with_controller_manager:
                self._start_controller_manager(binaries, deadline=started + timeout)
            if node_binaries is not None:
                self._start_fake_nodes(node_binaries, deadline=started + timeout)
        except BaseException:
            self.stop(keep_logs=True)
            raise
        self.started_seconds = time.monotonic() - started
        self._log(f"control plane ready at {self.server} in {self.started_seconds:.1f}s")

    def stop(self, *, keep_logs: bool = False) -> None:
        """Stop every component (newest first) and remove the folder unless asked to keep it."""
        for _name, process, log_file in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log_file.close()
        self._processes.clear()
        if keep_logs or self._keep_dir:
            self._log(f"control plane files and logs kept in {self.workdir}")
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------ components

    def kill(self, name: str) -> None:
        """SIGKILL one component (``"etcd"``, ``"kube-apiserver"``, ...) and wait for it."""
        for index, (known, process, log_file) in enumerate(self._processes):
            if known == name:
                if process.poll() is None:
                    process.kill()
                process.wait()
                log_file.close()
                del self._processes[index]
                return
        raise ControlPlaneError(f"no running component named {name}")

    def pid(self, name: str) -> int:
        """The process id of the running component ``name`` (``"etcd"``, ...)."""
        for known, process, _log in self._processes:
            if known == name and process.poll() is None:
                return process.pid
        raise ControlPlaneError(f"no running component named {name}")

    def restart(self, name: str, *, wait: bool = True, timeout: float = 60.0) -> None:
        """Start a component killed by :meth:`kill` again (same arguments); wait until ready.

        Call it from the main thread: the child is told to die with the thread that spawned
        it (``PR_SET_PDEATHSIG``). With ``wait=False`` it returns at once; then
        :meth:`wait_ready` (safe in a worker thread) waits.
        """
        if any(known == name for known, _process, _log in self._processes):
            raise ControlPlaneError(f"{name} is still running")
        self._spawn(name, self._argv[name], append=True)
        if wait:
            self.wait_ready(name, timeout=timeout)

    def wait_ready(self, name: str, *, timeout: float = 60.0) -> None:
        """Wait until the running component ``name`` answers its readiness check."""
        [process] = [process for known, process, _log in self._processes if known == name]
        ready = {
            "etcd": self._etcd_healthy,
            "kube-apiserver": self._apiserver_ready,
            "kube-scheduler": self._scheduler_healthy,
        }.get(name, lambda: True)
        self._wait(name, process, ready, time.monotonic() + timeout)

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision (through its JSON gateway); the revision.

        Watches that resume from an older resourceVersion then get 410 Gone (those the API
        server serves from etcd directly, such as core Events, which have no watch cache).
        """
        host, _, port = self.etcd_url.removeprefix("http://").partition(":")

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            try:
                connection.request("POST", path, json.dumps(body))
                response = connection.getresponse()
                payload = response.read()
                if response.status != 200:
                    raise ControlPlaneError(f"etcd {path}: {response.status} {payload!r}")
                return dict(json.loads(payload))
            finally:
                connection.close()

        revision = int(post("/v3/kv/range", {"key": "AA=="})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event written so far (needs ``audit_log=True``); torn lines skipped."""
        if not self._audit:
            raise ControlPlaneError("the control plane was started without audit_log=True")
        events: list[dict[str, Any]] = []
        with contextlib.suppress(FileNotFoundError):
            for line in self.audit_log.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    events.append(json.loads(line))
        return events

    def _spawn(
        self, name: str, argv: Sequence[str], *, append: bool = False
    ) -> subprocess.Popen[bytes]:
        self._argv[name] = list(argv)
        log_file = (self.logs_dir / f"{name}.log").open("ab" if append else "wb")
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            preexec_fn=_die_with_parent,
        )
        self._processes.append((name, process, log_file))
        return process

    def _wait(
        self,
        name: str,
        process: subprocess.Popen[bytes],
        ready: Callable[[], bool],
        deadline: float,
    ) -> None:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {process.returncode}; see "
                    f"{self.logs_dir / (name + '.log')}:\n{self._log_tail(name)}"
                )
            with contextlib.suppress(OSError, ssl.SSLError, http.client.HTTPException):
                if ready():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{name} was not ready in time; see {self.logs_dir / (name + '.log')}:\n"
            f"{self._log_tail(name)}"
        )

    def _log_tail(self, name: str, lines: int = 20) -> str:
        path = self.logs_dir / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _start_etcd(self, binaries: ControlPlaneBinaries, *, deadline: float) -> str:
        client_port, peer_port = _free_port(), _free_port()
        client_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        process = self._spawn(
            "etcd",
            [
                str(binaries.etcd),
                "--name=devcluster",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=devcluster={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
                *self._etcd_limits,
            ],
        )

        self.etcd_url = client_url
        self._wait("etcd", process, self._etcd_healthy, deadline)
        return client_url

    def _etcd_healthy(self) -> bool:
        host, _, port = self.etcd_url.removeprefix("http://").partition(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=2)
        try:
            connection.request("GET", "/health")
            response = connection.getresponse()
            return response.status == 200 and b"true" in response.read()
        finally:
            connection.close()

    def _apiserver_ready(self) -> bool:
        return self.request("GET", "/readyz", timeout=3).status == 200

    def _start_apiserver(
        self, binaries: ControlPlaneBinaries, etcd_url: str, *, deadline: float
    ) -> None:
        self.port = _free_port()
        self.ca_file.write_bytes(self._ca.cert_pem)
        serving_cert, serving_key = self._ca.issue(
            "kube-apiserver",
            server_hosts=("127.0.0.1", "localhost", "kubernetes.default.svc", "10.0.0.1"),
        ).write(self.pki_dir, "apiserver")
        sa_key = self.pki_dir / "service-account.key"
        sa_key.write_bytes(service_account_signing_key())
        sa_key.chmod(0o600)
        admin_cert, admin_key = self._ca.issue(
            "lifecycle-devcluster-admin", organizations=("system:masters",)
        ).write(self.pki_dir, "admin")
        self._write_kubeconfig(
            self.admin_kubeconfig,
            user="admin",
            credentials={
                "client-certificate-data": base64_text(admin_cert.read_bytes()),
                "client-key-data": base64_text(admin_key.read_bytes()),
            },
        )
        process = self._spawn(
            "kube-apiserver",
            [
                str(binaries.kube_apiserver),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={self.pki_dir / 'apiserver-generated'}",
                f"--tls-cert-file={serving_cert}",
                f"--tls-private-key-file={serving_key}",
                f"--client-ca-file={self.ca_file}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-signing-key-file={sa_key}",
                f"--service-account-key-file={sa_key}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                "--profiling=false",
                "--endpoint-reconciler-type=none",
                *self._audit_flags(),
            ],
        )

        self._wait("kube-apiserver", process, self._apiserver_ready, deadline)

    def _audit_flags(self) -> list[str]:
        if not self._audit:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxsize=0",
        ]

    def _start_controller_manager(self, binaries: ControlPlaneBinaries, *, deadline: float) -> None:
        process = self._spawn(
            "kube-controller-manager",
            [
                str(binaries.kube_controller_manager),
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--controllers={','.join(self.controllers)}",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "--concurrent-gc-syncs=5",
                "--namespace-sync-period=10s",
            ],
        )

        def default_service_account_exists() -> bool:
            path = "/api/v1/namespaces/default/serviceaccounts/default"
            return self.request("GET", path, timeout=3).status == 200

        self._wait("kube-controller-manager", process, default_service_account_exists, deadline)

    # ------------------------------------------------------------------ fake nodes

    def _start_fake_nodes(self, binaries: NodeBinaries, *, deadline: float) -> None:
        """kube-scheduler, kwok and the fake Nodes; returns once every Node is Ready."""
        self._scheduler_port = _free_port()
        scheduler = self._spawn(
            "kube-scheduler",
            scheduler_argv(
                binaries.kube_scheduler,
                self.admin_kubeconfig,
                port=self._scheduler_port,
                cert_dir=self.pki_dir / "scheduler-generated",
            ),
        )
        self._wait("kube-scheduler", scheduler, self._scheduler_healthy, deadline)
        configuration = self.workdir / "kwok.yaml"
        configuration.write_text(kwok_configuration(self.nodes))
        kwok = self._spawn("kwok", kwok_argv(binaries.kwok, self.admin_kubeconfig, configuration))
        create_fake_nodes(self, self.nodes)
        self._wait("kwok", kwok, lambda: fake_nodes_ready(self, self.nodes), deadline)

    def _scheduler_healthy(self) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its own self-signed serving certificate
        response = json_request("127.0.0.1", self._scheduler_port, context, "GET", "/healthz")
        return response.status == 200
