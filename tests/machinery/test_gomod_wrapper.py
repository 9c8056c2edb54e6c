"""The Kubernetes wrapper modules: how one is written for a release, and that every pinned
release has one whose go.mod matches what the generator writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lifecycle_controller.devcluster import binaries, gomod_wrapper
from lifecycle_controller.devcluster.binaries import BuildError, kubernetes_component
from lifecycle_controller.devcluster.gomod_wrapper import (
    nearest_patch,
    parse_release,
    render_go_mod,
    render_tools_go,
    staging_modules,
    staging_version,
    unavailable_modules,
    wrapper_name,
)
from lifecycle_controller.devcluster.versions import (
    KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
    KWOK_VERSION,
)

RELEASE_GO_MOD = """module k8s.io/kubernetes

go 1.22.0

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
\tgithub.com/example/other => github.com/example/other v1.0.0
)
"""


def test_release_versions_parse_and_name_their_staging_tag_and_folder() -> None:
    assert parse_release("v1.31.14") == (31, 14)
    assert staging_version("v1.31.14") == "v0.31.14"
    assert wrapper_name("v1.31.14") == "kubernetes-v1.31"
    for bad in ("1.31.14", "v1.31", "v2.0.0", "v1.31.0-rc.1"):
        with pytest.raises(ValueError, match="not a Kubernetes release"):
            parse_release(bad)


def test_staging_modules_are_read_from_the_releases_replaces() -> None:
    assert staging_modules(RELEASE_GO_MOD) == [
        "k8s.io/api",
        "k8s.io/client-go",
        "k8s.io/kube-scheduler",
    ]


def test_the_go_mod_pins_the_release_and_replaces_each_staging_module() -> None:
    text = render_go_mod(
        "v1.31.14",
        ["k8s.io/client-go", "k8s.io/api", "k8s.io/kube-scheduler"],
        {"k8s.io/kube-scheduler": "v0.31.13"},
    )
    assert text == (
        "module lifecycle-controller/devcluster/kubernetes-v1.31\n\n"
        "go 1.26.0\n\n"
        "require k8s.io/kubernetes v1.31.14\n\n"
        "replace (\n"
        "\tk8s.io/api => k8s.io/api v0.31.14\n"
        "\tk8s.io/client-go => k8s.io/client-go v0.31.14\n"
        "\tk8s.io/kube-scheduler => k8s.io/kube-scheduler v0.31.13 // v0.31.14 is not published\n"
        ")\n"
    )


def test_the_default_release_wrapper_requires_kwok_too() -> None:
    text = render_go_mod("v1.36.3", ["k8s.io/api"], kwok="v0.8.0")
    assert text == (
        "module lifecycle-controller/devcluster/kubernetes-v1.36\n\n"
        "go 1.26.0\n\n"
        "require k8s.io/kubernetes v1.36.3\n\n"
        "require sigs.k8s.io/kwok v0.8.0\n\n"
        "replace (\n"
        "\tk8s.io/api => k8s.io/api v0.36.3\n"
        ")\n"
    )


def test_the_pinned_default_wrapper_builds_kwok_and_no_other_does() -> None:
    """What ``devcluster gomod`` wrote: kwok shares the default release's module."""
    gomod = Path(gomod_wrapper.__file__).parent / "gomod"
    default = gomod / gomod_wrapper.wrapper_name(KUBERNETES_VERSION)
    assert f"require sigs.k8s.io/kwok {KWOK_VERSION}\n" in (default / "go.mod").read_text()
    assert f'_ "{gomod_wrapper.KWOK_COMMAND}"' in (default / "tools.go").read_text()
    others = [path for path in gomod.glob("kubernetes-v1.*") if path != default]
    assert others
    assert not any("sigs.k8s.io/kwok" in (path / "tools.go").read_text() for path in others)


def test_tools_go_imports_the_commands_behind_a_tag() -> None:
    text = render_tools_go(("k8s.io/kubernetes/cmd/kube-apiserver",))
    assert text.startswith("//go:build tools\n\npackage tools\n")
    assert '\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n' in text


def test_an_unpublished_staging_module_takes_the_nearest_older_patch_of_its_minor() -> None:
    published = ["v0.30.14", "v0.31.8", "v0.31.13", "v0.31.15", "v0.32.1", "junk"]
    assert nearest_patch("v0.31.14", published) == "v0.31.13"
    assert nearest_patch("v0.31.14", ["v0.30.14", "v0.32.0"]) is None


def test_tidy_errors_name_the_staging_modules_it_could_not_fetch() -> None:
    output = (
        "\tk8s.io/kube-scheduler/config/v1: k8s.io/kube-scheduler@v0.31.14: reading "
        "https://example.test/k8s.io/kube-scheduler/@v/v0.31.14.zip: 403 Forbidden\n"
        "\tgithub.com/x/y@v1.0.0: reading https://example.test/...: 404\n"
        "\tk8s.io/endpointslice@v0.31.14: unknown revision v0.31.14\n"
    )
    staging = ["k8s.io/kube-scheduler", "k8s.io/endpointslice", "k8s.io/api"]
    assert unavailable_modules(output, staging) == {"k8s.io/kube-scheduler", "k8s.io/endpointslice"}


def _replaces(go_mod: str) -> dict[str, str]:
    block = go_mod.split("replace (", 1)[1].split(")", 1)[0]
    found = re.findall(r"^\t(k8s\.io/\S+) => \1 (v\S+)", block, re.MULTILINE)
    return dict(found)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_pinned_release_has_a_tidy_wrapper(version: str) -> None:
    folder = binaries.GOMOD_DIR / wrapper_name(version)
    go_mod = (folder / "go.mod").read_text()
    assert f"\nrequire k8s.io/kubernetes {version}\n" in go_mod or (
        f"\tk8s.io/kubernetes {version}\n" in go_mod
    )
    replaces = _replaces(go_mod)
    assert "k8s.io/api" in replaces
    for module, tag in replaces.items():
        assert tag == staging_version(version) or (
            nearest_patch(staging_version(version), [tag]) == tag
            and f"{module} => {module} {tag} // {staging_version(version)} is not published"
            in go_mod
        ), module
    assert (folder / "go.sum").stat().st_size > 0
    assert (folder / "tools.go").is_file()


def test_the_pinned_releases_are_ordered_and_end_with_the_default() -> None:
    parsed = [parse_release(version) for version in KUBERNETES_VERSIONS]
    assert parsed == sorted(parsed)
    assert len({minor for minor, _patch in parsed}) == len(parsed)
    assert KUBERNETES_VERSIONS[-1] == KUBERNETES_VERSION


def test_each_release_is_its_own_cached_component() -> None:
    oldest = kubernetes_component(KUBERNETES_VERSIONS[0])
    assert oldest.cache_key == f"kubernetes-{KUBERNETES_VERSIONS[0]}"
    assert oldest.module == wrapper_name(KUBERNETES_VERSIONS[0])
    assert f"-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSIONS[0]}" in (
        oldest.ldflags
    )
    assert kubernetes_component() == binaries.KUBERNETES
    with pytest.raises(BuildError, match="not pinned"):
        kubernetes_component("v1.20.0")


class Completed:
    """What the faked ``subprocess.run`` returns."""

    def __init__(self, returncode: int, stdout: str = "", stderr: str = "") -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def test_write_wrapper_substitutes_what_the_proxy_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The go commands are faked: the first tidy cannot fetch kube-scheduler, the second
    (with the nearest published patch) succeeds."""
    go_mod_file = tmp_path / "release.mod"
    go_mod_file.write_text(RELEASE_GO_MOD)
    tidies: list[str] = []

    def run(argv: list[str], **kwargs: object) -> Completed:
        if argv[1:3] == ["mod", "download"]:
            return Completed(0, stdout=f'{{"GoMod": "{go_mod_file}"}}')
        if argv[1:3] == ["list", "-m"]:
            return Completed(0, stdout='{"Versions": ["v0.31.12", "v0.31.13"]}')
        assert argv[1:3] == ["mod", "tidy"]
        cwd = kwargs["cwd"]
        assert isinstance(cwd, Path)
        tidies.append((cwd / "go.mod").read_text())
        if len(tidies) == 1:
            return Completed(1, stderr="k8s.io/kube-scheduler@v0.31.14: reading x: 403 Forbidden")
        (cwd / "go.sum").write_text("sums\n")
        return Completed(0)

    monkeypatch.setattr("subprocess.run", run)
    folder = gomod_wrapper.write_wrapper("v1.31.14", tmp_path)
    assert folder == tmp_path / "kubernetes-v1.31"
    assert len(tidies) == 2
    assert "k8s.io/kube-scheduler v0.31.14\n" in tidies[0]
    assert "k8s.io/kube-scheduler v0.31.13 // v0.31.14 is not published" in tidies[1]
    assert (folder / "go.sum").read_text() == "sums\n"


def test_write_wrapper_gives_up_on_other_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go_mod_file = tmp_path / "release.mod"
    go_mod_file.write_text(RELEASE_GO_MOD)

    def run(argv: list[str], **kwargs: object) -> Completed:
        if argv[1:3] == ["mod", "download"]:
            return Completed(0, stdout=f'{{"GoMod": "{go_mod_file}"}}')
        return Completed(1, stderr="go: something else broke")

    monkeypatch.setattr("subprocess.run", run)
    with pytest.raises(RuntimeError, match="something else broke"):
        gomod_wrapper.write_wrapper("v1.31.14", tmp_path)


def test_a_release_the_proxy_does_not_have_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Completed:
        returncode, stdout, stderr = 1, '{"Error": "unknown revision v1.31.99"}', ""

    monkeypatch.setattr("subprocess.run", lambda *a, **k: Completed())
    with pytest.raises(RuntimeError, match=r"unknown revision v1\.31\.99"):
        gomod_wrapper.write_wrapper("v1.31.99", tmp_path)


def test_build_matrix_goes_on_past_a_release_that_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lifecycle_controller.devcluster import __main__ as command

    asked: list[str] = []

    def ensure(*, kubernetes: str = KUBERNETES_VERSION, log: object = None) -> object:
        asked.append(kubernetes)
        if kubernetes == KUBERNETES_VERSIONS[0]:
            raise BuildError("go build failed:\nsome Go error")
        return binaries.ControlPlaneBinaries(
            etcd=Path("/e"),
            kube_apiserver=Path(f"/{kubernetes}/kube-apiserver"),
            kube_controller_manager=Path("/c"),
        )

    monkeypatch.setattr(command, "_build_default", lambda: 0)
    monkeypatch.setattr(command, "ensure_binaries", ensure)
    assert command.main(["build", "--matrix"]) == 1
    assert asked == list(KUBERNETES_VERSIONS[:-1])
    output = capsys.readouterr()
    assert "some Go error" in output.err
    assert f"not built: {KUBERNETES_VERSIONS[0]}" in output.err
    assert f"{KUBERNETES_VERSIONS[1]}: /{KUBERNETES_VERSIONS[1]} (" in output.out

    asked.clear()
    assert command.main(["build", "--kubernetes", KUBERNETES_VERSIONS[1]]) == 0
    assert asked == [KUBERNETES_VERSIONS[1]]
    assert command.main(["gomod", "v1.31"]) == 1
    assert "not a Kubernetes release" in capsys.readouterr().err
    asked.clear()
    assert command.main(["build", "--oldest"]) == 1
    assert asked == [KUBERNETES_VERSIONS[0]]
