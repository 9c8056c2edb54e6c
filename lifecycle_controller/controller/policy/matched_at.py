"""``matchedAt``: when the controller first saw each object match each policy that reads it.

A policy's ``since: matchedAt`` counts its ``delete-after`` from the instant the object began
to match it (docs/policies.md#since). The pure resolution
(:meth:`~lifecycle_controller.core.policy.in_force.PolicySet.resolve`) takes what is known here
and says what it used (:attr:`~lifecycle_controller.core.policy.precedence.Resolution.matched_at`:
the known instant, or the pass's time for a first sight); :meth:`MatchedAt.observe` keeps it:

* a policy the object matches keeps its first instant (a later pass changes nothing);
* a policy it no longer matches forgets it, so a match again starts again;
* a policy that holds it because its match cannot be judged (a condition error, its
  Namespace's labels or what uses it not known) keeps what was known: nothing is learnt;
* a new generation of a policy starts again for every object (the entries are per
  generation), and so does a restart or a leader change, unless a store persists them
  (``--persist-observations``: :attr:`MatchedAt.on_change` tells it what changed,
  :meth:`MatchedAt.load` gives back what it kept; :mod:`.matched_store`).

What a store gives back is keyed by UID alone (its record is compact): such an entry waits in
:attr:`Track.loaded` until the object's first pass, which either takes it (the object still
matches: its first instant stands) or drops it (it no longer matches, or its policy holds it
for another reason than not knowing).

Only policies whose ``since`` reads ``matchedAt`` are tracked; an object costs one entry per
such policy it matches (its key, its UID, an integer), and nothing while nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.model import Policy, PolicyRef
from lifecycle_controller.core.policy.precedence import Resolution, UnjudgedReason

__all__ = ["MatchedAt", "Track"]

#: The reasons a policy is unjudged that say nothing of whether the object matches: what was
#: known stays.
_UNKNOWN = frozenset(
    {
        UnjudgedReason.CONDITION_ERROR,
        UnjudgedReason.NAMESPACE_UNKNOWN,
        UnjudgedReason.REFERENCES_UNKNOWN,
    }
)


@dataclass(slots=True)
class Track:
    """One policy generation's entries: object key → (its UID, when it began to match);
    ``loaded``: UID → instant, given back by a store and not yet passed over."""

    generation: int
    entries: dict[ObjectKey, tuple[str, int]] = field(default_factory=dict)
    loaded: dict[str, int] = field(default_factory=dict)

    def instants(self) -> list[tuple[str, int]]:
        """Every ``(uid, instant)`` known, what a store keeps."""
        return [*self.entries.values(), *self.loaded.items()]


def _tracking(policy: Policy) -> bool:
    return policy.since is not None and policy.since.reads_matched_at


class MatchedAt:
    """See the module docstring; one per pipeline."""

    def __init__(self) -> None:
        self.tracks: dict[PolicyRef, Track] = {}
        self._synced: PolicySet | None = None
        #: Called with the policy whose entries changed and whether one was removed (a
        #: store persists them; a removal is sent promptly: a stale instant is an earlier one).
        self.on_change: Callable[[PolicyRef, bool], None] | None = None

    def sync(self, policies: PolicySet) -> None:
        """Forget the policies gone, those that no longer read ``matchedAt`` and the
        generations replaced (once per policy set)."""
        if policies is self._synced:
            return
        self._synced = policies
        current = {p.ref: p.generation for p in policies.valid if _tracking(p)}
        for ref in list(self.tracks):
            if current.get(ref) != self.tracks[ref].generation:
                del self.tracks[ref]
                self._changed(ref, removed=True)
        for ref, generation in current.items():
            self.tracks.setdefault(ref, Track(generation))

    def of(self, key: ObjectKey, uid: str) -> Mapping[PolicyRef, int]:
        """When the object (this UID of it) began to match each tracked policy, as known."""
        found: dict[PolicyRef, int] = {}
        for ref, track in self.tracks.items():
            entry = track.entries.get(key)
            if entry is not None and entry[0] == uid:
                found[ref] = entry[1]
            elif uid in track.loaded:
                found[ref] = track.loaded[uid]
        return found

    def observe(self, key: ObjectKey, uid: str, resolution: Resolution) -> None:
        """Keep what a pass's resolution used (see the module docstring)."""
        began = resolution.matched_at
        kept = {hold.ref for hold in resolution.holds if hold.reason in _UNKNOWN}
        for ref, track in self.tracks.items():
            entry = track.entries.get(key)
            instant = began.get(ref)
            if instant is not None:
                track.loaded.pop(uid, None)
                if entry is None or entry[0] != uid:
                    track.entries[key] = (uid, instant)
                    self._changed(ref, removed=False)
            elif ref not in kept:
                if entry is not None:
                    del track.entries[key]
                    self._changed(ref, removed=True)
                if track.loaded.pop(uid, None) is not None:
                    self._changed(ref, removed=True)

    def gone(self, key: ObjectKey) -> None:
        """The object is gone (or no policy can match it any more)."""
        for ref, track in self.tracks.items():
            if track.entries.pop(key, None) is not None:
                self._changed(ref, removed=True)

    def load(self, ref: PolicyRef, generation: int, instants: Mapping[str, int]) -> bool:
        """Instants (UID → when) a store kept for ``ref``'s ``generation``; False (nothing
        loaded) for another generation or a policy not tracked. What is known here stays."""
        track = self.tracks.get(ref)
        if track is None or track.generation != generation:
            return False
        known = {uid for uid, _ in track.entries.values()}
        for uid, instant in instants.items():
            if uid not in known:
                track.loaded.setdefault(uid, instant)
        return True

    def _changed(self, ref: PolicyRef, *, removed: bool) -> None:
        if self.on_change is not None:
            self.on_change(ref, removed)
