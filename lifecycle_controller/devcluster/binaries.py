"""Build the control-plane binaries from pinned Go modules, once per machine, and cache them.

No container engine or release download is available on the machines this project targets,
so etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, helm and promtool are
compiled from their Go modules through the Go module proxy. ``k8s.io/kubernetes`` cannot be
``go install``-ed (its go.mod resolves the staging modules with replace directives), so each
component has a small wrapper module under ``gomod/`` that pins the release and replaces every
staging module with its published ``v0.Y.Z`` version.

On a machine whose Go module cache lacks the wrapper's modules (a first run), they are
downloaded first, as a step of its own that says how many are missing and reports its
progress (:class:`ModuleDownload`): the build estimates hold once the modules are there, and a
cold download of the Kubernetes modules can take longer than the compile itself
(docs/development.md, the cold path).

Results go to a per-user cache folder keyed by version. A file lock serialises concurrent
builders and a build lands by an atomic rename, so a second process either waits and reuses
the result or never sees a half-written folder. A caller asks for the binaries it needs, and
only those are built: a folder that landed before a binary joined its component (a
``kubernetes-v1.36.3`` from before kube-scheduler) gets the missing one added, by a rename of
its own, and keeps the others.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lifecycle_controller.devcluster.gomod_wrapper import wrapper_name
from lifecycle_controller.devcluster.versions import (
    ETCD_VERSION,
    HELM_VERSION,
    KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
    KWOK_VERSION,
    PROMETHEUS_VERSION,
)

GOMOD_DIR = Path(__file__).parent / "gomod"
BIN_DIR_ENV = "LIFECYCLE_DEVCLUSTER_BIN_DIR"
CACHE_DIR_ENV = "LIFECYCLE_DEVCLUSTER_CACHE"

Log = Callable[[str], None]


class BuildError(RuntimeError):
    """A component could not be built; the message carries the tail of the Go output."""


@dataclass(frozen=True)
class GoComponent:
    """One cached build: binaries compiled from packages of a wrapper module."""

    name: str
    version: str
    module: str
    packages: Mapping[str, str]
    ldflags: tuple[str, ...] = field(default=())
    #: Go build tags (``go build -tags``).
    tags: tuple[str, ...] = field(default=())
    #: Typical cold build time per binary in seconds (2 cores, empty Go caches), for the
    #: estimate shown while building; binaries not listed get no estimate.
    typical_seconds: Mapping[str, float] = field(default_factory=dict)

    @property
    def cache_key(self) -> str:
        return f"{self.name}-{self.version}"


#: Cold builds measured on 2 cores (kube-scheduler after the other Kubernetes binaries).
KUBE_SCHEDULER_SECONDS = 20.0
KWOK_SECONDS = 40.0


def _kube_version_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    prefix = "-X k8s.io/component-base/version."
    return (
        f"{prefix}gitVersion={version}",
        f"{prefix}gitMajor={major}",
        f"{prefix}gitMinor={minor}",
        f"{prefix}gitTreeState=clean",
    )


def kubernetes_component(version: str = KUBERNETES_VERSION) -> GoComponent:
    """kube-apiserver, kube-controller-manager and kube-scheduler of one pinned release, built
    from its wrapper module ``gomod/kubernetes-v1.Y`` and cached as ``kubernetes-<version>``."""
    if version not in KUBERNETES_VERSIONS:
        raise BuildError(
            f"Kubernetes {version} is not pinned; pinned: {', '.join(KUBERNETES_VERSIONS)}"
        )
    return GoComponent(
        name="kubernetes",
        version=version,
        module=wrapper_name(version),
        packages={
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            # Only for a control plane with fake nodes (ControlPlane(nodes=N)).
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        },
        ldflags=_kube_version_ldflags(version),
        typical_seconds={
            "kube-apiserver": 160.0,
            "kube-controller-manager": 45.0,
            "kube-scheduler": KUBE_SCHEDULER_SECONDS,
        },
    )


KUBERNETES = kubernetes_component()

#: The control plane proper; kube-scheduler is built only when fake nodes are asked for.
CONTROL_PLANE_BINARIES = ("kube-apiserver", "kube-controller-manager")

KWOK = GoComponent(
    name="kwok",
    version=KWOK_VERSION,
    # The default release's wrapper requires kwok too, so both resolve the same dependency
    # versions and kwok's build reuses what the Kubernetes builds compiled
    # (devcluster/gomod_wrapper.py).
    module=wrapper_name(KUBERNETES_VERSION),
    packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    typical_seconds={"kwok": KWOK_SECONDS},
)

ETCD = GoComponent(
    name="etcd",
    version=ETCD_VERSION,
    module="etcd",
    packages={"etcd": "go.etcd.io/etcd/server/v3"},
    typical_seconds={"etcd": 35.0},
)

HELM = GoComponent(
    name="helm",
    version=HELM_VERSION,
    module="helm",
    packages={"helm": "helm.sh/helm/v4/cmd/helm"},
    ldflags=(f"-X helm.sh/helm/v4/internal/version.version={HELM_VERSION}",),
    typical_seconds={"helm": 105.0},
)


def _prometheus_release(version: str = PROMETHEUS_VERSION) -> str:
    """The Prometheus release of a Go module tag: ``v0.316.0`` is Prometheus 3.16.0, and
    before 3.0 the minor was the release's own (``v0.54.1`` is 2.54.1)."""
    _, minor, patch = version.lstrip("v").split(".")
    major, release_minor = divmod(int(minor), 100)
    return f"{major or 2}.{release_minor}.{patch}"


PROMTOOL = GoComponent(
    name="promtool",
    version=PROMETHEUS_VERSION,
    module="promtool",
    packages={"promtool": "github.com/prometheus/prometheus/cmd/promtool"},
    ldflags=(f"-X github.com/prometheus/common/version.Version={_prometheus_release()}",),
    # Only rule checks and rule unit tests are needed: leave out every service-discovery
    # plugin (cloud SDKs, Kubernetes client), which is most of Prometheus's dependencies.
    tags=("remove_all_sd",),
    typical_seconds={"promtool": 180.0},
)


@dataclass(frozen=True)
class ControlPlaneBinaries:
    """Paths of the three control-plane executables."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path


@dataclass(frozen=True)
class NodeBinaries:
    """What a control plane with fake nodes adds: kube-scheduler binds Pods, kwok plays the
    kubelet of every fake Node (Pods Running and Ready, deleted ones gone)."""

    kube_scheduler: Path
    kwok: Path


def cache_root() -> Path:
    """The per-user cache folder: ``$LIFECYCLE_DEVCLUSTER_CACHE``, else the XDG cache dir."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lifecycle-controller" / "bin"


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _complete(directory: Path, wanted: Collection[str]) -> bool:
    return (directory / ".complete").is_file() and all(
        (directory / name).is_file() for name in wanted
    )


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain (>= 1.26) is needed to build the local control plane; install Go "
            f"or point {BIN_DIR_ENV} at a folder holding etcd, kube-apiserver and "
            "kube-controller-manager"
        )
    return go


#: How often a running build says what it is doing.
HEARTBEAT_SECONDS = 15.0


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


class BuildProgress:
    """What a long ``go build -v`` is doing, told at every heartbeat (every 15 s).

    ``go build -v`` prints each package as it compiles it; the heartbeat line says how long
    the build has run, against the typical time when one is known, how many packages are
    done and which one came last, so a first run never sits silent for minutes.
    """

    def __init__(
        self,
        binary: str,
        *,
        typical_seconds: float | None,
        log: Log,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.binary = binary
        self.typical_seconds = typical_seconds
        self._log = log
        self._now = now
        self.started = now()
        self.packages = 0
        self.last_package = ""
        self.output: deque[str] = deque(maxlen=30)
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        """One line of Go's output (a package name, or an error message)."""
        text = text.rstrip()
        with self._lock:
            self.output.append(text)
            # Package lines are bare import paths; errors have spaces or a file:line prefix.
            if text and " " not in text and ":" not in text and not text.startswith("#"):
                self.packages += 1
                self.last_package = text

    def heartbeat(self) -> None:
        elapsed = self._now() - self.started
        of = f" of about {_duration(self.typical_seconds)}" if self.typical_seconds else ""
        with self._lock:
            done, last = self.packages, self.last_package
        latest = f" (latest: {last})" if last else ""
        self._log(
            f"  ... {self.binary}: {_duration(elapsed)} elapsed{of}, "
            f"{done} packages compiled{latest}"
        )

    def tail(self) -> str:
        with self._lock:
            return "\n".join(self.output)


def module_cache_path(module: str, version: str) -> str:
    """Where the module cache keeps a module's zip, below ``cache/download`` (Go's escaping:
    an upper-case letter is ``!`` and the letter in lower case)."""
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)
    return f"{escaped}/@v/{version}.zip"


def required_modules(go_sum: str) -> list[tuple[str, str]]:
    """The modules whose source a ``go.sum`` pins (its ``/go.mod``-only lines left out)."""
    found = []
    for line in go_sum.splitlines():
        fields = line.split()
        if len(fields) == 3 and not fields[1].endswith("/go.mod"):
            found.append((fields[0], fields[1]))
    return found


class ModuleDownload:
    """``go mod download`` of a wrapper module, told at every heartbeat: how many of the
    modules that were missing from the module cache are there now."""

    binary = "modules"

    def __init__(
        self,
        cache: Path,
        missing: Collection[tuple[str, str]],
        *,
        log: Log,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._downloads = cache / "cache" / "download"
        self._missing = list(missing)
        self._log = log
        self._now = now
        self.started = now()
        self.output: deque[str] = deque(maxlen=30)

    def line(self, text: str) -> None:
        self.output.append(text.rstrip())

    def fetched(self) -> int:
        return sum(
            (self._downloads / module_cache_path(module, version)).is_file()
            for module, version in self._missing
        )

    def heartbeat(self) -> None:
        elapsed = _duration(self._now() - self.started)
        self._log(
            f"  ... modules: {elapsed} elapsed, {self.fetched()} of {len(self._missing)} "
            "downloaded (a few go.sum pins may never be needed)"
        )

    def tail(self) -> str:
        return "\n".join(self.output)


def _module_cache(go: str, env: Mapping[str, str]) -> Path:
    result = subprocess.run(
        [go, "env", "GOMODCACHE"], env=dict(env), capture_output=True, text=True, check=True
    )
    return Path(result.stdout.strip())


def _download_modules(go: str, module_dir: Path, env: Mapping[str, str], log: Log) -> None:
    """Download what the module cache lacks, as a step of its own (see the module docstring)."""
    go_sum = module_dir / "go.sum"
    needed = required_modules(go_sum.read_text()) if go_sum.is_file() else []
    if not needed:
        return
    cache = _module_cache(go, env)
    downloads = cache / "cache" / "download"
    missing = [(m, v) for m, v in needed if not (downloads / module_cache_path(m, v)).is_file()]
    if not missing:
        return
    log(
        f"downloading Go modules first: {len(missing)} of the {len(needed)} this build pins "
        f"are not in the module cache ({cache}); on an empty cache the download can take "
        "longer than the build (minutes, with the network's speed)"
    )
    progress = ModuleDownload(cache, missing, log=log)
    code = _run_go_build([go, "mod", "download"], module_dir, env, progress, HEARTBEAT_SECONDS)
    if code != 0:
        raise BuildError(f"go mod download failed:\n{progress.tail()}")
    log(
        f"downloaded {progress.fetched()} modules in "
        f"{_duration(time.monotonic() - progress.started)}"
    )


def _run_go_build(
    command: list[str],
    cwd: Path,
    env: Mapping[str, str],
    progress: BuildProgress | ModuleDownload,
    interval: float,
) -> int:
    """Run ``command`` (a ``go build -v`` or ``go mod download``), feeding its output to
    ``progress`` and calling its heartbeat every ``interval`` seconds; return its code."""
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        stream = process.stdout

        def read() -> None:
            for text in stream:
                progress.line(text)

        reader = threading.Thread(target=read, name=f"go-build-{progress.binary}", daemon=True)
        reader.start()
        while True:
            try:
                code = process.wait(timeout=interval)
                break
            except subprocess.TimeoutExpired:
                progress.heartbeat()
        reader.join(timeout=5)
    return code


def _build(component: GoComponent, destination: Path, log: Log, wanted: Collection[str]) -> None:
    go = _go()
    source = GOMOD_DIR / component.module
    with tempfile.TemporaryDirectory(prefix=f"build-{component.name}-") as work:
        module_dir = Path(work) / "module"
        shutil.copytree(source, module_dir)
        env = dict(os.environ)
        env.update({"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false", "GOWORK": "off"})
        ldflags = " ".join(("-s", "-w", *component.ldflags))
        _download_modules(go, module_dir, env, log)
        for binary, package in component.packages.items():
            if binary not in wanted:
                continue
            started = time.monotonic()
            typical = component.typical_seconds.get(binary)
            estimate = (
                f"; usually about {_duration(typical)} on 2 cores, its modules downloaded"
                if typical
                else ""
            )
            log(f"building {binary} {component.version} (first run on this machine only{estimate})")
            command = [
                go,
                "build",
                "-v",
                "-trimpath",
                "-ldflags",
                ldflags,
                *(("-tags", ",".join(component.tags)) if component.tags else ()),
                "-o",
                str(destination / binary),
                package,
            ]
            progress = BuildProgress(binary, typical_seconds=typical, log=log)
            code = _run_go_build(command, module_dir, env, progress, HEARTBEAT_SECONDS)
            if code != 0:
                raise BuildError(
                    f"go build {package}@{component.version} failed:\n{progress.tail()}"
                )
            log(f"built {binary} in {_duration(time.monotonic() - started)}")


def ensure_component(
    component: GoComponent, *, log: Log = print, binaries: Collection[str] | None = None
) -> Path:
    """Return the cache folder holding the component's binaries, building what is missing.

    ``binaries``: the names needed (every package of the component when None); only those
    are built, and a cached folder that lacks some of them gets just those added.
    """
    wanted = tuple(component.packages) if binaries is None else tuple(binaries)
    unknown = sorted(set(wanted) - set(component.packages))
    if unknown:
        raise BuildError(f"{component.name} has no binary named {', '.join(unknown)}")
    root = cache_root()
    final = root / component.cache_key
    if _complete(final, wanted):
        return final
    with _exclusive_lock(root / f".{component.cache_key}.lock"):
        if _complete(final, wanted):
            return final
        staging = Path(tempfile.mkdtemp(prefix=f".{component.cache_key}-", dir=root))
        try:
            if (final / ".complete").is_file():
                # Landed before these binaries were asked for (or joined the component).
                missing = [name for name in wanted if not (final / name).is_file()]
                _build(component, staging, log, missing)
                for name in missing:
                    (staging / name).rename(final / name)
            else:
                _build(component, staging, log, wanted)
                (staging / ".complete").write_text(component.version + "\n")
                if final.exists():
                    shutil.rmtree(final)
                staging.rename(final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return final


def ensure_binaries(
    *, log: Log = print, kubernetes: str = KUBERNETES_VERSION
) -> ControlPlaneBinaries:
    """Locate or build etcd, kube-apiserver and kube-controller-manager (of ``kubernetes``).

    ``$LIFECYCLE_DEVCLUSTER_BIN_DIR`` short-circuits the build with ready-made binaries.
    """
    explicit = os.environ.get(BIN_DIR_ENV)
    if explicit:
        folder = Path(explicit)
        binaries = ControlPlaneBinaries(
            etcd=folder / "etcd",
            kube_apiserver=folder / "kube-apiserver",
            kube_controller_manager=folder / "kube-controller-manager",
        )
        missing = [str(p) for p in vars(binaries).values() if not Path(p).is_file()]
        if missing:
            raise BuildError(f"{BIN_DIR_ENV} is set but lacks: {', '.join(missing)}")
        return binaries
    etcd_dir = ensure_component(ETCD, log=log)
    kube_dir = ensure_component(
        kubernetes_component(kubernetes), log=log, binaries=CONTROL_PLANE_BINARIES
    )
    return ControlPlaneBinaries(
        etcd=etcd_dir / "etcd",
        kube_apiserver=kube_dir / "kube-apiserver",
        kube_controller_manager=kube_dir / "kube-controller-manager",
    )


def _ready_made(name: str) -> Path | None:
    """``name`` inside ``$LIFECYCLE_DEVCLUSTER_BIN_DIR``, when that is set and holds it."""
    folder = os.environ.get(BIN_DIR_ENV)
    if folder and (Path(folder) / name).is_file():
        return Path(folder) / name
    return None


def ensure_node_binaries(*, log: Log = print, kubernetes: str = KUBERNETES_VERSION) -> NodeBinaries:
    """Locate or build kube-scheduler (of ``kubernetes``) and kwok (for fake nodes).

    Either one inside ``$LIFECYCLE_DEVCLUSTER_BIN_DIR`` is used as is when present.
    """
    scheduler = _ready_made("kube-scheduler") or (
        ensure_component(kubernetes_component(kubernetes), log=log, binaries=("kube-scheduler",))
        / "kube-scheduler"
    )
    kwok = _ready_made("kwok") or ensure_component(KWOK, log=log) / "kwok"
    return NodeBinaries(kube_scheduler=scheduler, kwok=kwok)


def ensure_helm(*, log: Log = print) -> Path:
    """Return the path of the pinned ``helm`` executable, building it on first use.

    A ``helm`` inside ``$LIFECYCLE_DEVCLUSTER_BIN_DIR`` is used as is when present.
    """
    return _ready_made("helm") or ensure_component(HELM, log=log) / "helm"


def ensure_promtool(*, log: Log = print) -> Path:
    """Return the path of the pinned ``promtool`` executable, building it on first use.

    A ``promtool`` inside ``$LIFECYCLE_DEVCLUSTER_BIN_DIR`` is used as is when present.
    """
    return _ready_made("promtool") or ensure_component(PROMTOOL, log=log) / "promtool"
