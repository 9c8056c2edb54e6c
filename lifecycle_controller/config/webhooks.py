"""Webhook URLs for notifications: the flags' parsers and the URL file (docs/notifications.md).

``--notify-webhook URL`` is repeatable; ``--notify-webhook-file PATH`` names a file with one
URL per line (blank lines and lines starting with ``#`` are ignored), so the URLs can sit in
a Secret mounted as a file. Only ``http`` and ``https`` URLs with a host are accepted.

Webhook URLs are secrets (a chat webhook URL is its own credential), so no message here
shows one: problems name the flag, the position (the Nth ``--notify-webhook``, the line of
the file) and what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from lifecycle_controller.config.parsing import ConfigError

__all__ = [
    "cluster_name",
    "read_webhook_file",
    "webhook_file",
    "webhook_url_problem",
    "webhook_urls",
]

_SCHEMES = ("http", "https")


def webhook_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a webhook URL (never quoting it); None if nothing."""
    if any(character.isspace() for character in url):
        return "a URL must not contain spaces"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return "not a valid URL (a bad port or unbalanced brackets)"
    if parts.scheme.lower() not in _SCHEMES:
        shown = f'scheme "{parts.scheme}"' if parts.scheme else "no scheme"
        return f"{shown}: expected an http:// or https:// URL"
    if not parts.hostname:
        return "the URL has no host"
    return None


def webhook_urls(flag: str, values: Sequence[str]) -> tuple[str, ...]:
    """The repeated flag's URLs, stripped, empty entries dropped, each one validated."""
    urls = tuple(value.strip() for value in values if value.strip())
    for index, url in enumerate(urls, start=1):
        problem = webhook_url_problem(url)
        if problem is not None:
            raise ConfigError(f"{flag} (value {index} of {len(urls)}): {problem}")
    return urls


def read_webhook_file(path: str, *, flag: str = "--notify-webhook-file") -> tuple[str, ...]:
    """The URLs in ``path``, one per line; ConfigError if unreadable or a line is invalid."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ConfigError(f"{flag}: cannot read {path}: {reason}") from None
    urls: list[str] = []
    for number, line in enumerate(lines, start=1):
        url = line.strip()
        if not url or url.startswith("#"):
            continue
        problem = webhook_url_problem(url)
        if problem is not None:
            raise ConfigError(f"{flag}: {path} line {number}: {problem}")
        urls.append(url)
    return tuple(urls)


def webhook_file(flag: str, value: str) -> str | None:
    """The file's path (None when empty), read and validated once now so a typo stops start-up."""
    path = value.strip()
    if not path:
        return None
    read_webhook_file(path, flag=flag)
    return path


def cluster_name(flag: str, value: str) -> str:
    """The stripped name shown in every notification; at most 253 characters."""
    name = value.strip()
    if len(name) > 253:
        raise ConfigError(f"{flag}: at most 253 characters, got {len(name)}")
    if any(not character.isprintable() for character in name):
        raise ConfigError(f"{flag}: must not contain control characters")
    return name
