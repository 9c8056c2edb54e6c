"""The binary cache of the local control plane: build once, reuse, and survive concurrency.

A tiny wrapper module stands in for Kubernetes so the real build path (copy the wrapper,
``go build``, stage, atomic rename under a file lock) runs in seconds.
"""

from __future__ import annotations

import multiprocessing
import shutil
import subprocess
from pathlib import Path

import pytest

from lifecycle_controller.devcluster import binaries
from lifecycle_controller.devcluster.binaries import BuildError, GoComponent

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain")

HELLO = GoComponent(name="hello", version="v0.0.1", module="hello", packages={"hello": "."})


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    gomod = tmp_path / "gomod" / "hello"
    gomod.mkdir(parents=True)
    (gomod / "go.mod").write_text("module example.com/hello\n\ngo 1.21\n")
    (gomod / "main.go").write_text(
        'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n'
    )
    monkeypatch.setattr(binaries, "GOMOD_DIR", tmp_path / "gomod")
    monkeypatch.setenv(binaries.CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path


def _build(queue: multiprocessing.Queue[str]) -> None:
    lines: list[str] = []
    folder = binaries.ensure_component(HELLO, log=lines.append)
    queue.put(f"{folder}|{sum(line.startswith('building') for line in lines)}")


def test_builds_once_then_reuses(sandbox: Path) -> None:
    logs: list[str] = []
    folder = binaries.ensure_component(HELLO, log=logs.append)
    assert folder == sandbox / "cache" / "hello-v0.0.1"
    output = subprocess.run([folder / "hello"], capture_output=True, text=True, check=True)
    assert output.stdout == "hello\n"
    assert (folder / ".complete").read_text() == "v0.0.1\n"
    logs.clear()
    assert binaries.ensure_component(HELLO, log=logs.append) == folder
    assert logs == []


def test_concurrent_builders_share_one_build(sandbox: Path) -> None:
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[str] = context.Queue()
    workers = [context.Process(target=_build, args=(queue,)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    results = [queue.get(timeout=5).split("|") for _ in workers]
    assert {folder for folder, _ in results} == {str(sandbox / "cache" / "hello-v0.0.1")}
    assert sorted(int(builds) for _, builds in results) == [0, 0, 1]
    leftovers = [p.name for p in (sandbox / "cache").iterdir() if p.name.startswith(".hello-v")]
    assert leftovers == [".hello-v0.0.1.lock"]


def test_a_failed_build_leaves_nothing_behind(sandbox: Path) -> None:
    (sandbox / "gomod" / "hello" / "main.go").write_text("package main\n\nthis does not compile\n")
    with pytest.raises(BuildError, match="go build"):
        binaries.ensure_component(HELLO, log=lambda _line: None)
    assert not (sandbox / "cache" / "hello-v0.0.1").exists()
    staged = [p for p in (sandbox / "cache").iterdir() if not p.name.endswith(".lock")]
    assert staged == []


def test_ready_made_binaries_skip_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("etcd", "kube-apiserver", "kube-controller-manager"):
        (tmp_path / name).write_text("#!/bin/sh\n")
    monkeypatch.setenv(binaries.BIN_DIR_ENV, str(tmp_path))
    found = binaries.ensure_binaries(log=lambda _line: None)
    assert found.kube_apiserver == tmp_path / "kube-apiserver"
    (tmp_path / "etcd").unlink()
    with pytest.raises(BuildError, match="lacks"):
        binaries.ensure_binaries(log=lambda _line: None)


def test_a_failed_build_reports_the_compiler_error(sandbox: Path) -> None:
    (sandbox / "gomod" / "hello" / "main.go").write_text("package main\n\nthis does not compile\n")
    with pytest.raises(BuildError, match=r"(?s)go build \.@v0\.0\.1 failed:.*main\.go:3"):
        binaries.ensure_component(HELLO, log=lambda _line: None)


def test_a_running_build_reports_progress_with_an_estimate(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Any real go build outlasts a 1 ms heartbeat, so at least one progress line appears.
    monkeypatch.setattr(binaries, "HEARTBEAT_SECONDS", 0.001)
    timed = GoComponent(
        name="hello",
        version="v0.0.1",
        module="hello",
        packages={"hello": "."},
        typical_seconds={"hello": 75.0},
    )
    logs: list[str] = []
    binaries.ensure_component(timed, log=logs.append)
    assert logs[0] == (
        "building hello v0.0.1 (first run on this machine only; usually about 1m15s on 2 cores, "
        "its modules downloaded)"
    )
    beats = [line for line in logs if line.startswith("  ... hello: ")]
    assert beats
    assert all("elapsed of about 1m15s, " in line for line in beats)
    assert logs[-1].startswith("built hello in ")


def test_modules_missing_from_the_cache_are_downloaded_first_and_said_so(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A go.sum pin the module cache lacks: the download step runs (offline here: the pin is
    not needed by the build, so nothing is fetched) and says how many were missing."""
    monkeypatch.setenv("GOMODCACHE", str(sandbox / "modcache"))
    monkeypatch.setenv("GOPROXY", "off")
    (sandbox / "gomod" / "hello" / "go.sum").write_text(
        "example.com/Unused v1.0.0 h1:abc=\nexample.com/Unused v1.0.0/go.mod h1:def=\n"
    )
    logs: list[str] = []
    binaries.ensure_component(HELLO, log=logs.append)
    assert logs[0] == (
        "downloading Go modules first: 1 of the 1 this build pins are not in the module cache "
        f"({sandbox / 'modcache'}); on an empty cache the download can take longer than the "
        "build (minutes, with the network's speed)"
    )
    assert logs[1].startswith("downloaded 0 modules in ")
    assert logs[2].startswith("building hello")


def test_a_full_module_cache_downloads_nothing(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = sandbox / "modcache"
    monkeypatch.setenv("GOMODCACHE", str(cache))
    (sandbox / "gomod" / "hello" / "go.sum").write_text("example.com/Unused v1.0.0 h1:abc=\n")
    zipped = (
        cache / "cache" / "download" / binaries.module_cache_path("example.com/Unused", "v1.0.0")
    )
    zipped.parent.mkdir(parents=True)
    zipped.write_bytes(b"")
    logs: list[str] = []
    binaries.ensure_component(HELLO, log=logs.append)
    assert logs[0].startswith("building hello")


@pytest.mark.parametrize(
    ("module", "path"),
    [
        ("k8s.io/api", "k8s.io/api/@v/v0.36.3.zip"),
        ("github.com/Azure/go-ansiterm", "github.com/!azure/go-ansiterm/@v/v0.36.3.zip"),
    ],
)
def test_module_cache_paths_escape_capitals(module: str, path: str) -> None:
    assert binaries.module_cache_path(module, "v0.36.3") == path


def test_required_modules_are_the_source_pins_of_go_sum() -> None:
    go_sum = (
        "k8s.io/api v0.36.3 h1:x=\n"
        "k8s.io/api v0.36.3/go.mod h1:y=\n"
        "k8s.io/only-mod v0.1.0/go.mod h1:z=\n"
        "\n"
    )
    assert binaries.required_modules(go_sum) == [("k8s.io/api", "v0.36.3")]


def test_a_download_counts_the_missing_modules_now_in_the_cache(tmp_path: Path) -> None:
    now = [10.0]
    lines: list[str] = []
    missing = [("k8s.io/api", "v1"), ("k8s.io/apiserver", "v1")]
    progress = binaries.ModuleDownload(tmp_path, missing, log=lines.append, now=lambda: now[0])
    landed = tmp_path / "cache" / "download" / binaries.module_cache_path("k8s.io/api", "v1")
    landed.parent.mkdir(parents=True)
    landed.write_bytes(b"")
    progress.line("go: downloading k8s.io/api v1\n")
    now[0] = 85.0
    progress.heartbeat()
    assert lines == [
        "  ... modules: 1m15s elapsed, 1 of 2 downloaded (a few go.sum pins may never be needed)"
    ]
    assert progress.tail() == "go: downloading k8s.io/api v1"


class TestBuildProgress:
    def test_counts_package_lines_and_names_the_latest(self) -> None:
        now = [100.0]
        lines: list[str] = []
        progress = binaries.BuildProgress(
            "kube-apiserver", typical_seconds=160.0, log=lines.append, now=lambda: now[0]
        )
        for text in ("internal/abi\n", "k8s.io/api/core/v1\n", "# k8s.io/broken\n"):
            progress.line(text)
        progress.line("broken/x.go:3:1: syntax error: non-declaration statement\n")
        now[0] = 235.0
        progress.heartbeat()
        assert lines == [
            "  ... kube-apiserver: 2m15s elapsed of about 2m40s, 2 packages compiled "
            "(latest: k8s.io/api/core/v1)"
        ]
        assert progress.tail().splitlines()[-1].startswith("broken/x.go:3:1")

    def test_without_an_estimate_or_packages(self) -> None:
        lines: list[str] = []
        progress = binaries.BuildProgress(
            "x", typical_seconds=None, log=lines.append, now=lambda: 0.0
        )
        progress.heartbeat()
        assert lines == ["  ... x: 0s elapsed, 0 packages compiled"]


def test_build_tags_reach_go_build(sandbox: Path) -> None:
    """promtool is built with ``remove_all_sd``; a tagged file shows the tag is passed."""
    (sandbox / "gomod" / "hello" / "tagged.go").write_text(
        '//go:build shout\n\npackage main\n\nfunc init() { println("tagged") }\n'
    )
    tagged = GoComponent(
        name="tagged", version="v0.0.1", module="hello", packages={"hello": "."}, tags=("shout",)
    )
    folder = binaries.ensure_component(tagged, log=lambda _line: None)
    output = subprocess.run([folder / "hello"], capture_output=True, text=True, check=True)
    assert (output.stdout, output.stderr) == ("hello\n", "tagged\n")
    plain = binaries.ensure_component(HELLO, log=lambda _line: None)
    output = subprocess.run([plain / "hello"], capture_output=True, text=True, check=True)
    assert output.stderr == ""


@pytest.mark.parametrize(
    ("module_tag", "release"),
    [("v0.316.0", "3.16.0"), ("v0.305.2", "3.5.2"), ("v0.54.1", "2.54.1")],
)
def test_prometheus_module_tags_name_their_release(module_tag: str, release: str) -> None:
    assert binaries._prometheus_release(module_tag) == release


def test_a_ready_made_promtool_skips_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "promtool").write_text("#!/bin/sh\n")
    monkeypatch.setenv(binaries.BIN_DIR_ENV, str(tmp_path))
    assert binaries.ensure_promtool(log=lambda _line: None) == tmp_path / "promtool"


def test_a_binary_added_to_a_cached_component_is_built_alone(sandbox: Path) -> None:
    """A cache folder from before a binary joined its component (kubernetes-v1.36.3 from
    before kube-scheduler) gets that binary added; the others are neither rebuilt nor moved."""
    old = binaries.ensure_component(HELLO, log=lambda _line: None)
    first = (old / "hello").stat()
    grown = GoComponent(
        name="hello",
        version="v0.0.1",
        module="hello",
        packages={"hello": ".", "hello-again": "."},
    )
    logs: list[str] = []
    folder = binaries.ensure_component(grown, log=logs.append, binaries=("hello-again",))
    assert folder == old
    assert [line for line in logs if line.startswith("building")] == [
        "building hello-again v0.0.1 (first run on this machine only)"
    ]
    assert (folder / "hello").stat().st_ino == first.st_ino
    output = subprocess.run([folder / "hello-again"], capture_output=True, text=True, check=True)
    assert output.stdout == "hello\n"
    logs.clear()
    assert binaries.ensure_component(grown, log=logs.append) == folder
    assert logs == []
    leftovers = [p.name for p in (sandbox / "cache").iterdir() if p.name.startswith(".hello-v")]
    assert leftovers == [".hello-v0.0.1.lock"]


def test_only_the_binaries_asked_for_are_built(sandbox: Path) -> None:
    pair = GoComponent(
        name="pair", version="v0.0.1", module="hello", packages={"one": ".", "two": "."}
    )
    folder = binaries.ensure_component(pair, log=lambda _line: None, binaries=("two",))
    assert sorted(p.name for p in folder.iterdir()) == [".complete", "two"]
    with pytest.raises(BuildError, match="no binary named three"):
        binaries.ensure_component(pair, log=lambda _line: None, binaries=("three",))


def test_ready_made_node_binaries_skip_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("kube-scheduler", "kwok"):
        (tmp_path / name).write_text("#!/bin/sh\n")
    monkeypatch.setenv(binaries.BIN_DIR_ENV, str(tmp_path))
    found = binaries.ensure_node_binaries(log=lambda _line: None)
    assert found == binaries.NodeBinaries(tmp_path / "kube-scheduler", tmp_path / "kwok")
