"""The notification flags: URL validation, the URL file, the cluster name, the settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.config import ConfigError, NotificationSettings, RawFlags, build_settings
from lifecycle_controller.config.webhooks import (
    cluster_name,
    read_webhook_file,
    webhook_url_problem,
    webhook_urls,
)

URL_VECTORS = [
    ("https://hooks.slack.com/services/T0/B0/XXXX", None),
    ("http://127.0.0.1:8080/hook", None),
    ("HTTPS://Example.COM/x?y=1", None),
    ("http://[::1]:9000/", None),
    ("ftp://example.com/x", 'scheme "ftp": expected an http:// or https:// URL'),
    ("hooks.slack.com/services/T0", "no scheme: expected an http:// or https:// URL"),
    ("https:///path-only", "the URL has no host"),
    ("https://example.com:port/", "not a valid URL"),
    ("https://exa mple.com/", "a URL must not contain spaces"),
    ("http://[::1/", "not a valid URL"),
]


@pytest.mark.parametrize(("url", "problem"), URL_VECTORS)
def test_url_vectors(url: str, problem: str | None) -> None:
    found = webhook_url_problem(url)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem)


@given(secret=st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ", min_size=12, max_size=40))
def test_a_problem_never_shows_the_url(secret: str) -> None:
    for url in (f"ftp://h/{secret}", f"https:///{secret}", f"{secret}/x", f"https://h:{secret}/"):
        problem = webhook_url_problem(url)
        assert problem is not None
        assert secret not in problem


@given(
    host=st.from_regex(r"[a-z][a-z0-9]{0,10}(\.[a-z]{2,5}){0,2}", fullmatch=True),
    path=st.from_regex(r"(/[A-Za-z0-9_.-]{1,12}){0,4}", fullmatch=True),
    scheme=st.sampled_from(["http", "https", "HTTP"]),
)
def test_every_http_url_with_a_host_is_accepted(host: str, path: str, scheme: str) -> None:
    assert webhook_url_problem(f"{scheme}://{host}{path}") is None


def test_the_flag_names_the_position_of_a_bad_value() -> None:
    with pytest.raises(ConfigError) as raised:
        webhook_urls("--notify-webhook", ["https://a.example/x", " ", "ftp://b.example/secret"])
    assert str(raised.value) == (
        '--notify-webhook (value 2 of 2): scheme "ftp": expected an http:// or https:// URL'
    )
    assert webhook_urls("--notify-webhook", [" https://a.example/x ", ""]) == (
        "https://a.example/x",
    )


def test_the_file_skips_blanks_and_comments_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "urls"
    path.write_text("# hooks\n\n  https://a.example/x  \nhttp://b.example/y\n")
    assert read_webhook_file(str(path)) == ("https://a.example/x", "http://b.example/y")
    path.write_text("https://a.example/x\n\nmailto:someone\n")
    with pytest.raises(ConfigError) as raised:
        read_webhook_file(str(path))
    assert str(raised.value) == (
        f'--notify-webhook-file: {path} line 3: scheme "mailto": expected an http:// or '
        "https:// URL"
    )


def test_a_missing_file_refuses_to_start(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=r"--notify-webhook-file: cannot read .*nope: No such"):
        build_settings(RawFlags(notify_webhook_file=str(missing)))


def test_the_settings(tmp_path: Path) -> None:
    assert build_settings(RawFlags()).notifications == NotificationSettings()
    assert not NotificationSettings().enabled
    path = tmp_path / "urls"
    path.write_text("")
    settings = build_settings(
        RawFlags(
            notify_webhook=("https://a.example/x", "http://b.example/y"),
            notify_webhook_file=str(path),
            cluster_name=" prod-eu ",
        )
    ).notifications
    assert settings.webhooks == ("https://a.example/x", "http://b.example/y")
    assert settings.webhook_file == str(path)
    assert settings.cluster_name == "prod-eu"
    assert settings.enabled
    assert NotificationSettings(webhook_file=str(path)).enabled  # an empty file counts


def test_cluster_name_limits() -> None:
    assert cluster_name("--cluster-name", "") == ""
    with pytest.raises(ConfigError, match="at most 253 characters"):
        cluster_name("--cluster-name", "x" * 254)
    with pytest.raises(ConfigError, match="control characters"):
        cluster_name("--cluster-name", "a\nb")
