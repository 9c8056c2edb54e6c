"""The ``max-delete-ttl`` guardrail: how a deletion's TTL is measured, and its refusal.

The cap (``--max-delete-ttl``, tightened by a Namespace's ``max-delete-ttl`` annotation,
docs/behaviour.md#max-delete-ttl) refuses deletions scheduled too far ahead. A refusal must
not expire: no later pass, restart or Namespace change may turn a refused value into a
deletion while the object's own annotation stays the same. So a TTL is measured from an
instant that does not move:

* ``delete-after``: its duration, as the reference measures it;
* ``delete-at`` written by a user (the object carries no ``managed-by``): the time from the
  object's ``creationTimestamp`` to the deadline. Measured from the moment of the pass, as
  the reference does, a value refused today would be deleted after a restart past its
  deadline;
* ``delete-at`` on an object the controller has already written to (``managed-by`` is set,
  the usual case: it converted a ``delete-after`` that passed the cap): the time from the
  pass to the deadline, as the reference measures it, so a conversion is never refused
  afterwards. The controller's own value cannot be told from a later hand edit without
  recording when it was written, which it does not do;
* an object without a ``creationTimestamp`` (a manifest given to ``plan``) counts as created
  at the time of the pass.

TTLs are shown rounded up to whole seconds, so a refused TTL always reads longer than the
cap (a cap is whole seconds by its grammar).

A refusal also says why in a few words (:attr:`TtlRefusal.refusal`: ``delete-at
2026-12-01T10:00:00Z exceeds max-delete-ttl 168h (--max-delete-ttl)``): the refused decision
carries it (``Invalid.refusal``; a policy's says its own value, ``delete-after 720h``), so that
a policy's status can count the objects it refuses, and the tools say the same words
(docs/policies.md#status).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.outcomes import DecisionSettings, ObjectFacts, Refusal
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.text.gotext import format_go_duration
from lifecycle_controller.core.text.units import NS_PER_SECOND

__all__ = ["TtlRefusal", "compact_duration", "delete_at_ttl", "refuse_ttl"]


@dataclass(frozen=True, slots=True)
class TtlRefusal:
    """A refused deletion: its ``DeleteTTLExceeded`` Warning, the log detail and what was
    refused by which cap, in a few words (what a policy's ``Refused`` condition counts)."""

    event: Event
    log: str
    refusal: Refusal


def delete_at_ttl(
    due_ns: int, *, annotations: Mapping[str, str], facts: ObjectFacts, now_ns: int
) -> int:
    """The TTL of a ``delete-at`` due at ``due_ns``, from the instant the module names."""
    if annotations.get(keys.MANAGED_BY) == keys.MANAGED_BY_VALUE:
        return due_ns - now_ns
    start = now_ns if facts.creation_ns is None else facts.creation_ns
    return due_ns - start


def compact_duration(ns: int) -> str:
    """A Go duration without its trailing zero units: ``168h``, ``1h30m``, ``90s`` reads
    ``1m30s``, ``0s``."""
    text = format_go_duration(ns)
    if text.endswith("m0s"):
        text = text[:-2]
    if text.endswith("h0m"):
        text = text[:-2]
    return text


def _whole_seconds_up(ns: int) -> int:
    return -(-ns // NS_PER_SECOND) * NS_PER_SECOND


def refuse_ttl(
    settings: DecisionSettings, *, annotation: str, value: str, ttl_ns: int
) -> TtlRefusal | None:
    """The refusal of ``annotation=value`` with ``ttl_ns`` under the cap, or None if allowed.

    A TTL equal to the cap is allowed. The Event and the log name where the cap came from:
    the flag (the reference's text) or the Namespace's annotation.
    """
    limit = settings.max_delete_ttl_ns
    if limit is None or ttl_ns <= limit:
        return None
    namespace = settings.max_delete_ttl_namespace
    shown = _whole_seconds_up(ttl_ns)
    event = events.delete_ttl_exceeded(
        annotation=annotation, value=value, ttl_ns=shown, max_ns=limit, namespace=namespace
    )
    source = (
        "--max-delete-ttl"
        if namespace is None
        else f"the max-delete-ttl annotation of Namespace {namespace}"
    )
    short = annotation.removeprefix(keys.PREFIX)
    flag = "--max-delete-ttl" if namespace is None else f"Namespace {namespace}'s annotation"
    return TtlRefusal(
        event,
        f"{short} exceeds {source}: TTL {format_go_duration(shown)} "
        f"> maximum {format_go_duration(limit)}",
        Refusal(f"{short} {value}", f"max-delete-ttl {compact_duration(limit)} ({flag})"),
    )
