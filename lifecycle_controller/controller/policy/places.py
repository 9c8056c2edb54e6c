"""A limited policy's places, written into its status before they are used.

The record and its rules are pure (:mod:`~lifecycle_controller.core.policy.places`); this is
the leader's side of it, per policy:

* **the book** (in memory): the batch this process holds (its places not used yet, by object,
  and those used, with their instants), the batches another holder left that it has seeded
  into the window already, and why the last write failed. The pass's facts read it
  (:meth:`recorded`); taking a place (:meth:`use`) and giving it back (:meth:`unuse`) change
  it with no ``await``;
* **the writes**, one per batch (:meth:`reserve`): the policy read fresh, its own previous
  batch settled (the places used one group, their audit entries counted in
  ``status.actions``/``lastActions`` in the same write, so that settling never loses them; a
  dry-run report's place counts, its entry is the report's own, counted once as every
  rehearsal is; the places in flight, and those free and still usable, carried into the new
  batch), the places wanted (the object asking first, then its policy's other objects due
  now, earliest first, as many as the window has free by the batch's last usable instant,
  at most :data:`~lifecycle_controller.core.policy.places.MAX_BATCH`: an object whose place
  frees meanwhile goes when the window lets it, with no write then), the occurrences it
  names taken out of another holder's batches (their count stays: the successor acts on
  them under its own names), patched with the read's resourceVersion. A Conflict is read
  and tried again twice; any failure leaves the places unrecorded and the actions waiting
  (the pass's hold says why). One write at a time per policy: a pass that finds its place
  recorded by the write it waited for writes nothing, and one that a write could give no
  place writes nothing;
* **the status writer's audit** (:meth:`unnamed`, :meth:`audited`): the write that counts
  actions of this process's batch in the audit also takes their names out of the record
  (their count stays), so neither a successor nor the next batch counts them again;
* **a stopped leader's batch** (:meth:`settle`): once its ``until`` has passed and this
  process has decided every object once, each occurrence it names is looked up
  (``done``: a deletion's object gone, a restart the workload's marker shows since the
  batch) and counted in the audit, and the batch becomes one group of its whole count.

Writes are the leader's, as every write: a process that stops leading stops its pipeline,
and with it the passes that could use a place.
"""

from __future__ import annotations

import asyncio
import bisect
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import structlog

from lifecycle_controller.core.policy.audit import AuditEntry, merge
from lifecycle_controller.core.policy.limit import LimitWindow
from lifecycle_controller.core.policy.model import PolicyKind, PolicyRef
from lifecycle_controller.core.policy.places import (
    MAX_BATCH,
    RECORD,
    USE_MARGIN_NS,
    Batch,
    Place,
    PlaceRecord,
    batch_lifetime,
    parse_record,
    settled_entries,
)
from lifecycle_controller.kube import Conflict, KubeError, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from lifecycle_controller.machinery.clock import Clock

__all__ = ["PolicyPlaces", "StatusApi"]

_log = structlog.get_logger(__name__)
#: A write that meets a Conflict reads and tries again this many times in all.
_ATTEMPTS = 3
#: Why an action has no recorded place when the write could not give it one.
_NO_PLACE = "no place free: the window's places are used or recorded for objects due first"


class StatusApi(Protocol):
    """The two calls on a policy object the controller makes for its status: a read, and a
    merge patch of the ``status`` subresource (the places here, the rest in ``status.py``)."""

    async def merge_patch(
        self,
        resource: Any,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        field_manager: str = ...,
        subresource: str = ...,
    ) -> dict[str, Any]: ...

    async def get(self, resource: Any, namespace: str | None, name: str) -> dict[str, Any]: ...


@dataclass
class _Slot:
    """One place of this process's open batch: free, taken (its action in flight), done."""

    place: Place
    key_id: str
    taken_ns: int | None = None
    done: bool = False
    #: Done by a dry-run report: its place counts, but its audit entry is the report's own
    #: (counted once by the rehearsal's rules, docs/reliability.md#rehearsal-once).
    dry_run: bool = False
    #: Its audit entry is written (by the status writer): settling it counts nothing more.
    audited: bool = False


@dataclass
class _Book:
    """One policy's places as this process knows them."""

    uid: str
    batch: Batch | None = None
    #: The open batch's places, by occurrence.
    slots: dict[str, _Slot] = field(default_factory=dict)
    #: The occurrences the write in flight settles (done before it read the policy).
    settling: frozenset[str] = frozenset()
    #: The batches of other holders seeded into the window (holder, at).
    seen: set[tuple[str, int]] = field(default_factory=set)
    #: Other holders' batches as last read.
    foreign: tuple[Batch, ...] = ()
    problem: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def slot(self, key_id: str, due_ns: int) -> _Slot | None:
        for slot in self.slots.values():
            if slot.key_id == key_id and slot.place.due_ns == due_ns:
                return slot
        return None


def _resource(ref: PolicyRef) -> Any:
    return POLICIES if ref.kind is PolicyKind.NAMESPACED else CLUSTER_POLICIES


def _usable(batch: Batch | None, now_ns: int) -> bool:
    return batch is not None and now_ns < batch.until_ns - USE_MARGIN_NS


class PolicyPlaces:
    """See the module docstring; one per pipeline, set on its
    :class:`~lifecycle_controller.controller.policy.limits.PolicyLimits`."""

    def __init__(
        self,
        api: StatusApi,
        clock: Clock,
        *,
        done: Callable[[Place, int], bool] = lambda place, since_ns: False,
        holder: str | None = None,
    ) -> None:
        self._api = api
        self._clock = clock
        #: Whether a stopped leader's place was used (its action done since the instant).
        self._done = done
        #: This process, as its batches name it.
        self.holder = holder or secrets.token_hex(6)
        self._books: dict[PolicyRef, _Book] = {}
        #: Status writes made, by what they were for (``reserve``, ``settle``).
        self.writes: dict[str, int] = {"reserve": 0, "settle": 0}

    # ------------------------------------------------------------------ memory

    def seed(self, ref: PolicyRef, uid: str, status: Mapping[str, Any]) -> list[int] | None:
        """The instants a new window of ``ref`` starts with (None: its status has no record:
        the window seeds from ``lastActions``). Another holder's batches are remembered."""
        book = self._book(ref, uid)
        record = parse_record(status)
        if record is None:
            return None
        foreign = record.foreign(self.holder)
        book.foreign = foreign
        book.seen |= {batch.ident for batch in foreign}
        return PlaceRecord(record.groups, foreign).instants()

    def _book(self, ref: PolicyRef, uid: str) -> _Book:
        book = self._books.get(ref)
        if book is None or book.uid != uid:
            book = self._books[ref] = _Book(uid)
        return book

    def recorded(self, ref: PolicyRef, key_id: str, now_ns: int) -> frozenset[int]:
        """The due times of the object's occurrences holding a free place usable at
        ``now_ns``."""
        book = self._books.get(ref)
        if book is None or not _usable(book.batch, now_ns):
            return frozenset()
        return frozenset(
            slot.place.due_ns
            for slot in book.slots.values()
            if slot.key_id == key_id and slot.taken_ns is None
        )

    def problem(self, ref: PolicyRef) -> str | None:
        book = self._books.get(ref)
        return None if book is None else book.problem

    def use(self, ref: PolicyRef, key_id: str, due_ns: int) -> bool:
        """The object's recorded place is taken now (False: none usable now)."""
        book = self._books.get(ref)
        now = self._clock.now_ns()
        if book is None or not _usable(book.batch, now):
            return False
        slot = book.slot(key_id, due_ns)
        if slot is None or slot.taken_ns is not None:
            return False
        slot.taken_ns = now
        return True

    def unuse(self, ref: PolicyRef, key_id: str, due_ns: int) -> None:
        """The action that took the place was not carried out: the place is free again."""
        book = self._books.get(ref)
        slot = None if book is None else book.slot(key_id, due_ns)
        if slot is not None and not slot.done:
            slot.taken_ns = None

    def finish(self, ref: PolicyRef, key_id: str, due_ns: int, *, dry_run: bool = False) -> None:
        """The action that took the place was carried out (or reported, ``dry_run``)."""
        book = self._books.get(ref)
        slot = None if book is None else book.slot(key_id, due_ns)
        if slot is not None and slot.taken_ns is not None:
            slot.done = True
            slot.dry_run = dry_run

    def unnamed(
        self, ref: PolicyRef, status: Mapping[str, Any], occurrences: Iterable[str]
    ) -> dict[str, Any] | None:
        """``status.limit`` with those occurrences unnamed in this process's batches (their
        places still counted), for the status writer's write of their audit entries: a
        successor then never counts them again (None: nothing to change)."""
        record = parse_record(status)
        gone = set(occurrences)
        if record is None or not any(
            p.occurrence in gone
            for b in record.batches
            if b.holder == self.holder
            for p in b.places
        ):
            return None
        batches = tuple(b.without(gone) if b.holder == self.holder else b for b in record.batches)
        return PlaceRecord(record.groups, batches).document()

    def audited(self, ref: PolicyRef, occurrences: Iterable[str]) -> None:
        """The audit entries of those occurrences are written."""
        book = self._books.get(ref)
        for occurrence in occurrences if book is not None else ():
            slot = book.slots.get(occurrence) if book is not None else None
            if slot is not None:
                slot.audited = True

    def drop(self, refs: Iterable[PolicyRef]) -> None:
        for ref in refs:
            self._books.pop(ref, None)

    def settleable(self, now_ns: int) -> list[PolicyRef]:
        """The policies with a batch another holder left whose ``until`` has passed."""
        return [
            ref
            for ref, book in self._books.items()
            if any(batch.until_ns < now_ns for batch in book.foreign)
        ]

    # ------------------------------------------------------------------ writes

    async def reserve(
        self, ref: PolicyRef, uid: str, want: list[Place], window: LimitWindow
    ) -> None:
        """Record places for ``want`` (its first one, the asker's, at least) in one write
        (see the module); the book says how it went (:meth:`problem`)."""
        book = self._book(ref, uid)
        first = want[0]
        async with book.lock:
            now = self._clock.now_ns()
            if first.due_ns in self.recorded(ref, _key_id(first), now):
                book.problem = None
                return  # the write this pass waited for recorded it
            if self._free(book, window, now) <= 0:  # a write would record nothing for it
                book.problem = _NO_PLACE
                return
            book.problem = await self._write(
                ref, book, lambda record: self._reserved(book, record, want, window)
            )
            recorded = self.recorded(ref, _key_id(first), self._clock.now_ns())
            if book.problem is None and first.due_ns not in recorded:
                book.problem = _NO_PLACE

    async def settle(self, ref: PolicyRef, window_ns: int) -> None:
        """Count in the audit what another holder's batches past their ``until`` did, and
        keep their places as groups (see the module)."""
        book = self._books.get(ref)
        if book is None:
            return
        async with book.lock:
            problem = await self._write(
                ref, book, lambda record: self._settled(book, record, window_ns)
            )
            if problem is not None:
                _log.warning("policy limit places not settled", policy=str(ref), error=problem)

    def _reserved(
        self, book: _Book, record: PlaceRecord, want: list[Place], window: LimitWindow
    ) -> tuple[PlaceRecord, list[AuditEntry], str]:
        """The record with this process's next batch, and the audit entries it settles."""
        now = self._clock.now_ns()
        limit = window.limit
        self._seen(book, record, window)
        done = [slot for slot in book.slots.values() if slot.done]
        book.settling = frozenset(slot.place.occurrence for slot in done)
        stamps = [slot.taken_ns or now for slot in done]
        groups = [(max(stamps), len(stamps))] if stamps else []
        usable = _usable(book.batch, now)
        carried = [
            slot
            for slot in book.slots.values()
            if not slot.done and (slot.taken_ns is not None or usable)
        ]
        free = self._free(book, window, now)
        names = {slot.place.occurrence for slot in carried}
        places = [slot.place for slot in carried]
        for place in want:
            if free <= 0 or len(places) >= MAX_BATCH:
                break
            if place.occurrence not in names:
                names.add(place.occurrence)
                places.append(place)
                free -= 1
        batch = Batch(
            holder=self.holder,
            at_ns=now,
            until_ns=now + batch_lifetime(limit.window_ns),
            count=len(places),
            places=tuple(places),
        )
        foreign = tuple(b.without(names) for b in record.foreign(self.holder))
        kept = record.with_groups(groups, now_ns=now, window_ns=limit.window_ns)
        batches = (*foreign, batch) if places else foreign
        entries = [
            slot.place.entry(slot.taken_ns or now)
            for slot in done
            if not slot.dry_run and not slot.audited
        ]
        return PlaceRecord(kept, batches), entries, "reserve"

    @staticmethod
    def _free(book: _Book, window: LimitWindow, now_ns: int) -> int:
        """The places a new batch may record: those of the window free by the batch's last
        usable instant (a place freeing meanwhile is recorded now: its object goes when the
        window lets it, with no write then), less those of the open batch still free
        (recorded for the objects it names)."""
        reserved = 0
        if _usable(book.batch, now_ns):
            reserved = sum(1 for slot in book.slots.values() if slot.taken_ns is None)
        limit = window.limit
        last = now_ns + batch_lifetime(limit.window_ns) - USE_MARGIN_NS
        stamps = window.stamps(now_ns)
        busy = len(stamps) - bisect.bisect_right(stamps, last - limit.window_ns)
        return limit.actions - busy - reserved

    def _settled(
        self, book: _Book, record: PlaceRecord, window_ns: int
    ) -> tuple[PlaceRecord, list[AuditEntry], str]:
        """The record with the batches other holders left, past their ``until``, settled."""
        now = self._clock.now_ns()
        book.settling = frozenset()
        entries: list[AuditEntry] = []
        groups: list[tuple[int, int]] = []
        kept: list[Batch] = []
        for batch in record.batches:
            if batch.holder == self.holder or batch.until_ns >= now:
                kept.append(batch)
                continue
            entries += settled_entries(batch, partial(self._verify, since_ns=batch.at_ns))
            groups.append((batch.until_ns, batch.count))
        merged = record.with_groups(groups, now_ns=now, window_ns=window_ns)
        return PlaceRecord(merged, tuple(kept)), entries, "settle"

    def _verify(self, place: Place, *, since_ns: int) -> bool:
        return self._done(place, since_ns)

    def _seen(self, book: _Book, record: PlaceRecord, window: LimitWindow) -> None:
        """Another holder's batch this process has not counted yet counts in its window."""
        foreign = record.foreign(self.holder)
        for batch in foreign:
            if batch.ident not in book.seen:
                book.seen.add(batch.ident)
                window.seed([batch.until_ns] * batch.count)
        book.foreign = foreign

    async def _write(
        self,
        ref: PolicyRef,
        book: _Book,
        build: Callable[[PlaceRecord], tuple[PlaceRecord, list[AuditEntry], str]],
    ) -> str | None:
        """Read the policy, build the new record on it, patch it guarded by the read's
        resourceVersion; None on success, else why it failed."""
        resource = _resource(ref)
        for _ in range(_ATTEMPTS):
            try:
                fresh = await self._api.get(resource, ref.namespace, ref.name)
                metadata = fresh.get("metadata") or {}
                if metadata.get("uid") != book.uid:
                    return "the policy was deleted"
                status: Mapping[str, Any] = fresh.get("status") or {}
                record, entries, purpose = build(parse_record(status) or PlaceRecord())
                body: dict[str, Any] = {RECORD: record.document()}
                if entries:
                    actions, last, added = merge(status, entries)
                    if added:
                        body["actions"] = actions
                        body["lastActions"] = last
                patch = {"metadata": {"resourceVersion": metadata.get("resourceVersion")}}
                await self._api.merge_patch(
                    resource,
                    ref.namespace,
                    ref.name,
                    {**patch, "status": body},
                    subresource="status",
                )
            except Conflict:
                continue
            except NotFound:
                return "the policy was deleted"
            except KubeError as error:
                return str(error) or type(error).__name__
            self.writes[purpose] += 1
            self._wrote(book, record)
            return None
        return "the policy's status kept changing (conflict)"

    def _wrote(self, book: _Book, record: PlaceRecord) -> None:
        """The record is written: the book follows it (the places settled leave it; those
        carried keep what happened to them meanwhile)."""
        book.foreign = record.foreign(self.holder)
        own = [b for b in record.batches if b.holder == self.holder]
        batch = own[-1] if own else None
        if batch is not None and book.batch is not None and batch.ident == book.batch.ident:
            return  # a settle write: this process's batch is unchanged
        old = {o: s for o, s in book.slots.items() if o not in book.settling}
        book.batch = batch
        book.slots = {
            place.occurrence: old.get(place.occurrence) or _Slot(place, _key_id(place))
            for place in (batch.places if batch is not None else ())
        }
        book.settling = frozenset()


def _key_id(place: Place) -> str:
    """The object key id of the place's object (as ``ObjectKey.id`` spells it)."""
    return f"{place.resource}/{place.namespace}/{place.name}"
