"""The chart's values for webhook notifications (docs/notifications.md#helm).

Off by default (no flag, no volume). ``notifications.webhooks`` become ``--notify-webhook``
flags; ``notifications.existingSecret`` mounts the Secret's key as a file (a whole-volume
mount, so updates arrive) and passes it with ``--notify-webhook-file``; ``clusterName``
becomes ``--cluster-name``. The rendered flags parse as ``run`` flags, and the schema refuses
a URL that is not http or https.
"""

from __future__ import annotations

from pathlib import Path

from lifecycle_controller import config
from tests.chart.support import Helm, args_of, manager_container, one, parse_run_args

MOUNT = "/etc/lifecycle-controller/notifications"


def _flag(args: list[str], name: str) -> list[str]:
    return [arg.split("=", 1)[1] for arg in args if arg.startswith(f"--{name}=")]


def test_off_by_default(helm: Helm) -> None:
    docs = helm.render()
    args = args_of(docs)
    assert not [arg for arg in args if arg.startswith(("--notify-", "--cluster-name"))]
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert [volume["name"] for volume in volumes] == ["tmp"]


def test_inline_webhooks_and_the_cluster_name(helm: Helm) -> None:
    values = {
        "clusterName": "prod-eu",
        "notifications": {"webhooks": ["https://hooks.example/a", "http://10.0.0.7:8080/b"]},
    }
    args = args_of(helm.render(values))
    assert _flag(args, "notify-webhook") == ["https://hooks.example/a", "http://10.0.0.7:8080/b"]
    assert _flag(args, "cluster-name") == ["prod-eu"]
    assert not _flag(args, "notify-webhook-file")
    settings = config.build_settings(parse_run_args(args)).notifications
    assert settings.webhooks == ("https://hooks.example/a", "http://10.0.0.7:8080/b")
    assert settings.cluster_name == "prod-eu"


def test_an_existing_secret_is_mounted_and_passed_as_the_url_file(
    helm: Helm, tmp_path: Path
) -> None:
    values = {"notifications": {"existingSecret": "hooks", "existingSecretKey": "slack.txt"}}
    docs = helm.render(values)
    args = args_of(docs)
    assert _flag(args, "notify-webhook-file") == [f"{MOUNT}/slack.txt"]
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    [volume] = [volume for volume in spec["volumes"] if volume["name"] == "notifications"]
    assert volume["secret"] == {
        "secretName": "hooks",
        "items": [{"key": "slack.txt", "path": "slack.txt"}],
    }
    [mount] = [m for m in manager_container(docs)["volumeMounts"] if m["name"] == "notifications"]
    assert mount == {"name": "notifications", "mountPath": MOUNT, "readOnly": True}
    assert "subPath" not in mount
    # The rendered flags are valid once the file exists (here in a stand-in folder).
    (tmp_path / "slack.txt").write_text("https://hooks.example/a\n")
    local = [arg.replace(MOUNT, str(tmp_path)) for arg in args]
    settings = config.build_settings(parse_run_args(local)).notifications
    assert settings.webhook_file == str(tmp_path / "slack.txt")


def test_the_secret_key_defaults_to_urls(helm: Helm) -> None:
    args = args_of(helm.render({"notifications": {"existingSecret": "hooks"}}))
    assert _flag(args, "notify-webhook-file") == [f"{MOUNT}/urls"]


def test_the_schema_refuses_a_url_that_is_not_http(helm: Helm) -> None:
    error = helm.render_failure({"notifications": {"webhooks": ["ftp://hooks.example/a"]}})
    assert "webhooks" in error
    error = helm.render_failure({"notifications": {"existingSecretKey": "a/b"}})
    assert "existingSecretKey" in error
    error = helm.render_failure({"notifications": {"webhook": ["https://hooks.example/a"]}})
    assert "webhook" in error


def test_held_actions_are_notified_one_by_one_only_when_asked(helm: Helm) -> None:
    asked = args_of(helm.render({"notifications": {"heldActions": True}}))
    assert _flag(asked, "notify-held-actions") == ["true"]
    assert config.build_settings(parse_run_args(asked)).notifications.held_actions
    assert not _flag(args_of(helm.render()), "notify-held-actions")
