"""Who may scrape ``/metrics``: controller-runtime's authentication and authorisation filter.

The bearer token goes to a ``TokenReview``; the user it names to a ``SubjectAccessReview``
for the HTTP verb on the non-resource URL (``get`` ``/metrics``). Both answers are cached
briefly so a scraper every few seconds costs two API calls per cache period, not per scrape.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import structlog
from cachetools import TTLCache

from lifecycle_controller.kube import KubeError
from lifecycle_controller.machinery.clock import Clock, RealClock

__all__ = ["ApiRequester", "Denial", "ScrapeAuthorizer", "UserInfo"]

_log = structlog.get_logger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class ApiRequester(Protocol):
    """The slice of ``kube.KubeClient`` the scrape authoriser needs."""

    async def request(self, method: str, path: str, *, body: Any = None) -> dict[str, Any]:
        """Send one request; return the decoded JSON answer; raise ``KubeError``."""
        ...


@dataclass(frozen=True, slots=True)
class UserInfo:
    """The identity a ``TokenReview`` returned."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_status(cls, user: Mapping[str, Any]) -> UserInfo:
        extra = user.get("extra") or {}
        return cls(
            username=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(map(str, v or ()))) for k, v in extra.items())),
        )

    def spec(self) -> dict[str, Any]:
        """The user fields of a ``SubjectAccessReview`` spec."""
        return {
            "user": self.username,
            "uid": self.uid,
            "groups": list(self.groups),
            "extra": {key: list(values) for key, values in self.extra},
        }


_V = TypeVar("_V")


class _TtlCache(Generic[_V]):
    """``cachetools.TTLCache`` on the injected clock, telling a cached ``None`` from a miss.

    Entries expire ``ttl`` seconds after they were stored; beyond ``max_entries`` the least
    recently used one is evicted. A non-positive ``ttl`` or ``max_entries`` disables caching.
    """

    def __init__(self, *, clock: Clock, ttl: float, max_entries: int) -> None:
        self._items: TTLCache[Hashable, _V] | None = (
            TTLCache(maxsize=max_entries, ttl=ttl, timer=clock.monotonic)
            if ttl > 0 and max_entries > 0
            else None
        )

    def get(self, key: Hashable) -> tuple[bool, _V | None]:
        """Return (hit, value)."""
        if self._items is None:
            return False, None
        try:
            return True, self._items[key]
        except KeyError:
            return False, None

    def put(self, key: Hashable, value: _V) -> None:
        if self._items is not None:
            self._items[key] = value

    def __len__(self) -> int:
        return 0 if self._items is None else len(self._items)


@dataclass(frozen=True, slots=True)
class Denial:
    """Why a scrape was refused: HTTP status and body."""

    status: int
    text: str


class ScrapeAuthorizer:
    """Bearer token → ``TokenReview`` → ``SubjectAccessReview`` (non-resource URL), cached.

    Positive and negative answers are cached for ``ttl`` seconds (at most ``max_entries``
    each, least recently used evicted) so a scraper every few seconds costs two API calls
    per ``ttl``, not per scrape. Failed API calls are not cached: a failed TokenReview means
    401 "Authentication failed", a failed SubjectAccessReview 500, as in controller-runtime.
    Tokens are cached by their SHA-256, never stored as they are.
    """

    def __init__(
        self,
        api: ApiRequester,
        *,
        clock: Clock | None = None,
        ttl: float = 10.0,
        max_entries: int = 1024,
    ) -> None:
        self._api = api
        clock = clock if clock is not None else RealClock()
        self._users: _TtlCache[UserInfo | None] = _TtlCache(
            clock=clock, ttl=ttl, max_entries=max_entries
        )
        self._decisions: _TtlCache[bool] = _TtlCache(clock=clock, ttl=ttl, max_entries=max_entries)

    async def check(self, authorization: str | None, *, path: str, verb: str) -> Denial | None:
        """Return None when the request may proceed, else the :class:`Denial` to answer."""
        token = _bearer_token(authorization)
        if token is None:
            return Denial(401, "Unauthorized")
        try:
            user = await self.authenticate(token)
        except KubeError as error:
            _log.error("scrape authentication failed", error=str(error))
            return Denial(401, "Authentication failed")
        if user is None:
            _log.debug("scrape token not authenticated")
            return Denial(401, "Unauthorized")
        try:
            allowed = await self.authorize(user, path=path, verb=verb)
        except KubeError as error:
            _log.error("scrape authorization failed", user=user.username, error=str(error))
            return Denial(500, f"Authorization for user {user.username} failed")
        if not allowed:
            _log.debug("scrape authorization denied", user=user.username, path=path, verb=verb)
            return Denial(403, f"Authorization denied for user {user.username}")
        return None

    async def authenticate(self, token: str) -> UserInfo | None:
        """The user ``token`` belongs to, or None when the apiserver rejects it."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, cached = self._users.get(key)
        if hit:
            return cached
        review = await self._api.request(
            "POST",
            TOKEN_REVIEWS,
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        user = (
            UserInfo.from_status(status.get("user") or {}) if status.get("authenticated") else None
        )
        self._users.put(key, user)
        return user

    async def authorize(self, user: UserInfo, *, path: str, verb: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
        key = (user, path, verb)
        hit, cached = self._decisions.get(key)
        if hit and cached is not None:
            return cached
        review = await self._api.request(
            "POST",
            SUBJECT_ACCESS_REVIEWS,
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {**user.spec(), "nonResourceAttributes": {"path": path, "verb": verb}},
            },
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._decisions.put(key, allowed)
        return allowed


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token
