"""Which credentials a client takes, and what its configuration shows of them.

kubectl's order for the tools (the kubeconfig before the Pod's ServiceAccount), client-go
controllers' order for ``run``; a configuration's ``repr`` never carries a secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lifecycle_controller.kube.connection import (
    ClusterConfig,
    ConnectionConfigError,
    kubeconfig_path,
)

HOME_CONFIG = "home"
IN_CLUSTER = None
NOTHING = "error"


@pytest.mark.parametrize(
    ("explicit", "variable", "home", "pod", "in_cluster_first", "expected"),
    [
        # --kubeconfig and $KUBECONFIG win whatever else there is.
        ("flag", "", True, True, True, "flag"),
        ("flag", "variable", True, True, False, "flag"),
        (None, "variable", True, True, True, "variable"),
        # A tool, as kubectl: ~/.kube/config before the Pod's account.
        (None, "", True, True, False, HOME_CONFIG),
        (None, "", False, True, False, IN_CLUSTER),
        (None, "", True, False, False, HOME_CONFIG),
        (None, "", False, False, False, NOTHING),
        # The controller, as client-go controllers: its Pod's account first.
        (None, "", True, True, True, IN_CLUSTER),
        (None, "", True, False, True, HOME_CONFIG),
        (None, "", False, False, True, NOTHING),
    ],
)
def test_credentials_order(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    explicit: str | None,
    variable: str,
    home: bool,
    pod: bool,
    in_cluster_first: bool,
    expected: str | None,
) -> None:
    files = {name: tmp_path / name for name in ("flag", "variable")}
    for path in files.values():
        path.write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if home:
        (tmp_path / "home" / ".kube").mkdir(parents=True)
        (tmp_path / "home" / ".kube" / "config").write_text("{}")
    monkeypatch.setenv("KUBECONFIG", str(files[variable]) if variable else "")
    if pod:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    else:
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    chosen = str(files[explicit]) if explicit else None
    if expected == NOTHING:
        with pytest.raises(ConnectionConfigError, match="no cluster configured"):
            kubeconfig_path(chosen, in_cluster_first=in_cluster_first)
        return
    found = kubeconfig_path(chosen, in_cluster_first=in_cluster_first)
    if expected is IN_CLUSTER:
        assert found is None
    elif expected == HOME_CONFIG:
        assert found == str(tmp_path / "home" / ".kube" / "config")
    else:
        assert found == str(files[expected])


def test_the_repr_leaves_the_secrets_out() -> None:
    config = ClusterConfig(
        host="https://kube.invalid:6443",
        cert_data=b"-----BEGIN CERTIFICATE-----",
        key_data=b"-----BEGIN PRIVATE KEY----- secret-key",
        proxy="http://user:proxy-password@proxy.invalid:3128",
        token="secret-token",
    )
    shown = repr(config)
    assert "kube.invalid" in shown
    for secret in ("secret-token", "secret-key", "proxy-password"):
        assert secret not in shown
