"""Write the Go wrapper module that builds one Kubernetes release, so a bump is one command.

``k8s.io/kubernetes`` resolves its staging modules (``k8s.io/api``, ``k8s.io/client-go``, ...)
through ``replace`` directives pointing into its own source tree, which ``go build`` ignores
for a dependency. A wrapper module (``gomod/kubernetes-v1.Y/``) therefore pins the release and
replaces every staging module with its published ``v0.Y.Z`` twin. The staging list changes
between minors, so it is read from the release's own go.mod (fetched through ``go mod
download``), and ``go mod tidy`` then resolves the rest. The module proxy does not hold
every staging module at every patch (``k8s.io/kube-controller-manager`` skips some); such a
module is replaced with the newest published patch of the same minor below the release
instead, and the go.mod says so in a comment. The default release's wrapper also builds kwok
(:data:`KWOK_COMMAND`): one module resolves both, so kwok compiles against the very package
versions kube-apiserver was just compiled with and the Go build cache serves all but its own
packages (157 of its 974), which took a cold kwok build from minutes to well under one:

    python -m lifecycle_controller.devcluster gomod v1.31.14
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

#: The commands the wrapper's tools.go imports, so ``go mod tidy`` records all they need.
KUBERNETES_COMMANDS = (
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
)

#: kwok's command, built from the default release's wrapper (module docstring).
KWOK_COMMAND = "sigs.k8s.io/kwok/cmd/kwok"

_RELEASE = re.compile(r"^v1\.(\d+)\.(\d+)$")
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/src/\1\s*$")
_UNAVAILABLE = re.compile(
    r"(k8s\.io/[\w.-]+)@(v0\.\d+\.\d+): (?:reading|unknown revision|.*not found)"
)


def parse_release(version: str) -> tuple[int, int]:
    """``"v1.31.14"`` -> ``(31, 14)``; anything but a ``v1.Y.Z`` release is refused."""
    match = _RELEASE.match(version)
    if match is None:
        raise ValueError(f"not a Kubernetes release version (v1.Y.Z): {version!r}")
    return int(match.group(1)), int(match.group(2))


def staging_version(version: str) -> str:
    """The staging modules' tag of a release: Kubernetes v1.31.14 publishes them as v0.31.14."""
    minor, patch = parse_release(version)
    return f"v0.{minor}.{patch}"


def wrapper_name(version: str) -> str:
    """The wrapper folder under ``gomod/`` of a release: one per minor (``kubernetes-v1.31``)."""
    minor, _patch = parse_release(version)
    return f"kubernetes-v1.{minor}"


def staging_modules(release_go_mod: str) -> list[str]:
    """The staging modules a release's go.mod replaces with its own tree, sorted."""
    return sorted(
        {
            match.group(1)
            for line in release_go_mod.splitlines()
            if (match := _STAGING_REPLACE.match(line))
        }
    )


def nearest_patch(wanted: str, published: Iterable[str]) -> str | None:
    """The newest published ``v0.Y.Z`` of ``wanted``'s minor that is not newer than it."""
    minor, patch = parse_release(wanted.replace("v0.", "v1.", 1))
    candidates = []
    for tag in published:
        with contextlib.suppress(ValueError):
            candidate = parse_release(tag.replace("v0.", "v1.", 1))
            if candidate[0] == minor and candidate[1] <= patch:
                candidates.append(candidate)
    return f"v0.{minor}.{max(candidates)[1]}" if candidates else None


def unavailable_modules(tidy_output: str, staging: Iterable[str]) -> set[str]:
    """Staging modules whose pinned version ``go mod tidy`` could not fetch."""
    known = set(staging)
    return {m.group(1) for m in _UNAVAILABLE.finditer(tidy_output) if m.group(1) in known}


def render_go_mod(
    version: str,
    staging: Iterable[str],
    substitutes: Mapping[str, str] | None = None,
    *,
    kwok: str | None = None,
) -> str:
    """The wrapper's go.mod before ``go mod tidy``: the release and the staging replaces.

    ``substitutes``: staging modules pinned to another patch (not published at the release's);
    ``kwok``: the kwok release the wrapper requires too (the default release's wrapper).
    """
    tag = staging_version(version)
    substitutes = substitutes or {}
    replaces = "".join(
        f"\t{module} => {module} {substitutes[module]} // {tag} is not published\n"
        if module in substitutes
        else f"\t{module} => {module} {tag}\n"
        for module in sorted(staging)
    )
    return (
        f"module lifecycle-controller/devcluster/{wrapper_name(version)}\n\n"
        "go 1.26.0\n\n"
        f"require k8s.io/kubernetes {version}\n\n"
        + (f"require sigs.k8s.io/kwok {kwok}\n\n" if kwok else "")
        + f"replace (\n{replaces})\n"
    )


def render_tools_go(commands: Iterable[str] = KUBERNETES_COMMANDS) -> str:
    """tools.go: blank imports of the commands, behind a build tag that is never set."""
    imports = "".join(f'\t_ "{command}"\n' for command in commands)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports})\n"


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GOFLAGS": "-mod=mod", "GOWORK": "off", "CGO_ENABLED": "0"})
    return env


def release_go_mod(version: str, *, go: str = "go") -> str:
    """The text of ``k8s.io/kubernetes@version``'s go.mod, downloaded into the module cache."""
    completed = subprocess.run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        capture_output=True,
        text=True,
        env=_go_env(),
        check=False,
    )
    info = json.loads(completed.stdout or "{}")
    if completed.returncode != 0 or "GoMod" not in info:
        raise RuntimeError(
            f"go mod download k8s.io/kubernetes@{version} failed: "
            f"{info.get('Error') or completed.stderr.strip()}"
        )
    return Path(info["GoMod"]).read_text()


def _published(module: str, *, go: str) -> list[str]:
    completed = subprocess.run(
        [go, "list", "-m", "-versions", "-json", module],
        capture_output=True,
        text=True,
        env=_go_env(),
        check=False,
    )
    if completed.returncode != 0:
        return []
    versions: list[str] = json.loads(completed.stdout).get("Versions", [])
    return versions


def write_wrapper(
    version: str, gomod_dir: Path, *, go: str = "go", kwok: str | None = None
) -> Path:
    """Write ``gomod_dir/kubernetes-v1.Y/`` for ``version`` and tidy it; return the folder.

    ``kwok``: a kwok release to build from the same module (the default release's wrapper).
    """
    staging = staging_modules(release_go_mod(version, go=go))
    if not staging:
        raise RuntimeError(f"k8s.io/kubernetes@{version}'s go.mod replaces no staging module")
    folder = gomod_dir / wrapper_name(version)
    folder.mkdir(parents=True, exist_ok=True)
    commands = (*KUBERNETES_COMMANDS, *((KWOK_COMMAND,) if kwok else ()))
    (folder / "tools.go").write_text(render_tools_go(commands))
    substitutes: dict[str, str] = {}
    while True:
        (folder / "go.mod").write_text(render_go_mod(version, staging, substitutes, kwok=kwok))
        (folder / "go.sum").unlink(missing_ok=True)
        tidy = subprocess.run(
            [go, "mod", "tidy"],
            cwd=folder,
            capture_output=True,
            text=True,
            env=_go_env(),
            check=False,
        )
        if tidy.returncode == 0:
            return folder
        missing = unavailable_modules(tidy.stderr, staging) - set(substitutes)
        for module in sorted(missing):
            nearest = nearest_patch(staging_version(version), _published(module, go=go))
            if nearest is None or nearest == staging_version(version):
                missing.discard(module)
            else:
                substitutes[module] = nearest
        if not missing:
            raise RuntimeError(f"go mod tidy for {version} failed:\n{tidy.stderr[-3000:]}")
