"""A policy's deletions that ``max-delete-ttl`` refuses, counted and said in its status.

``--max-delete-ttl`` (and a Namespace's ``max-delete-ttl`` annotation, the tighter of the two)
refuses a deletion scheduled further ahead than the cap; it does not shorten it. A policy
whose ``delete-after`` is longer than the cap therefore deletes nothing where the cap applies,
and each object it decides there gets a ``DeleteTTLExceeded`` Warning. So that the policy
does not look in force while it acts on nothing, its status says so:

* ``Refused`` (:func:`refused_condition`): ``True``, reason ``MaxDeleteTTL``, while it decides
  objects whose deletion the cap refuses, its message each cause counted, the commonest first:
  ``3 objects: delete-after 720h exceeds max-delete-ttl 168h (--max-delete-ttl)``;
* ``Ready`` (:func:`readiness`): ``False``, reason ``MaxDeleteTTL``, when the cap refuses every
  object it decides; ``True`` with the count in its message when it refuses some.

The cause is the refused decision's own (``Invalid.refusal``, built where the cap is checked,
its value the policy's own), so the status, ``policies try`` and ``explain`` use the same
words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from lifecycle_controller.core.decision.outcomes import Decision, Invalid

__all__ = [
    "REFUSED_REASON",
    "SHOWN_CAUSES",
    "cap_refusals",
    "readiness",
    "refused_condition",
]

#: The reason of the ``Refused`` condition and of ``Ready=False`` it causes.
REFUSED_REASON: Final = "MaxDeleteTTL"
#: A ``Refused`` message names at most this many causes (one per cap and value), then counts.
SHOWN_CAUSES: Final = 3


def cap_refusals(decisions: Iterable[Decision]) -> tuple[tuple[str, str], ...]:
    """``(policy, cause)`` of each decision a policy made that the cap refused."""
    return tuple(
        (decision.policy, str(decision.refusal))
        for decision in decisions
        if isinstance(decision, Invalid) and decision.refusal and decision.policy
    )


def _objects(count: int) -> str:
    return f"{count} object" if count == 1 else f"{count} objects"


def refused_condition(causes: Mapping[str, int]) -> tuple[bool, str, str]:
    """``(status, reason, message)`` of the ``Refused`` condition for the objects refused,
    counted by cause."""
    counted = sorted(((n, cause) for cause, n in causes.items() if n > 0), key=_commonest)
    if not counted:
        return False, "NothingRefused", ""
    parts = [f"{_objects(n)}: {cause}" for n, cause in counted[:SHOWN_CAUSES]]
    rest = counted[SHOWN_CAUSES:]
    if rest:
        parts.append(f"{_objects(sum(n for n, _ in rest))} for {len(rest)} other causes")
    return True, REFUSED_REASON, "; ".join(parts)


def _commonest(item: tuple[int, str]) -> tuple[int, str]:
    return -item[0], item[1]


def readiness(decided: int, refused: int) -> tuple[bool, str, str] | None:
    """``Ready`` when the cap refuses objects a policy decides (None: it refuses none):
    ``False`` when it refuses every one, else ``True`` saying how many."""
    if refused <= 0:
        return None
    if refused >= decided:
        return (
            False,
            REFUSED_REASON,
            f"max-delete-ttl refuses the deletion of every object it decides ({refused}); "
            "see Refused",
        )
    return (
        True,
        "Active",
        f"the policy is in force; max-delete-ttl refuses the deletion of {refused} of the "
        f"{decided} objects it decides; see Refused",
    )
