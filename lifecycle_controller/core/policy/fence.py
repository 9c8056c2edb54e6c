"""The policy fence's comparison: does the API server's view decide the deletion the pass did?

A policy deletion is decided on the controller's copies: of the policies (a watch keeps them)
and of the Namespace labels a ``namespaceSelector`` reads (another watch). The object's own
DELETE preconditions do not cover them, so before a policy deletion goes the controller reads
the same facts from the API server (``controller/policy/fence.py``: the policies that may
concern the object's namespace, and its Namespace's labels when a selector reads them) and
resolves the object on that fresh view with the same pure code as every decision
(:meth:`~.in_force.PolicySet.resolve`, :func:`~.decide.decide_with_policies`).
:func:`unconfirmed` then compares the two decisions. The deletion goes only when the fresh
view decides it too:

* by the same policy object (its ``metadata.uid``) at the same ``metadata.generation``;
* the same action, due at the same instant, with the same propagation.

Anything else the fresh view says stops it: another policy wins now (a new one of higher
rank, a ``LifecyclePolicy`` over a cluster policy), an invalid policy holds the object, the
Namespace's labels no longer match the selector, the policy was narrowed, edited, deleted
or created again; so does a fresh view that could not be read (:func:`unreadable`). That
reason is a fact, like the guardrails' state: the pass hands it to
:func:`~lifecycle_controller.core.decision.guardrails.check` (``FenceFacts``), the one place
that builds the ``policy_unconfirmed`` hold, before any other guardrail, and requeues the
object; by the next pass the controller's own view has usually caught up, and decides.
"""

from __future__ import annotations

from lifecycle_controller.core.decision.outcomes import Decision, Delete
from lifecycle_controller.core.policy.model import Policy
from lifecycle_controller.core.policy.precedence import Resolution
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano

__all__ = ["deciding_policy", "unconfirmed", "unreadable"]


def deciding_policy(resolution: Resolution, name: str) -> Policy | None:
    """The policy called ``name`` (``Kind/namespace/name``) if it decides a family of
    ``resolution`` (under an enforced deletion, also the next contender: the deletion is the
    sooner of the two); None when it decides nothing there."""
    for inputs in resolution.families:
        for candidate in (inputs, inputs.sooner):
            if candidate is None or candidate.decided_by is None:
                continue
            if str(candidate.decided_by.ref) == name:
                return candidate.decided_by
    return None


def describe(decision: Decision) -> str:
    """``Wait (due 2030-01-01T00:00:00Z) by LifecyclePolicy/team/keep``, for a hold's log."""
    due = "" if decision.due_ns is None else f" (due {format_rfc3339_nano(decision.due_ns)})"
    by = f" by {decision.policy}" if decision.policy else " by the object's own annotations"
    said = f": {decision.log}" if decision.log and not decision.due_ns else ""
    return f"{type(decision).__name__}{due}{by}{said}"


def unconfirmed(
    decided: Delete, on: Resolution, fresh: Decision, fresh_on: Resolution
) -> str | None:
    """Why ``decided`` (a policy's deletion, decided on ``on``) may not go when the API
    server's view resolves to ``fresh_on`` and decides ``fresh``; None: it may."""
    name = decided.policy or ""
    now = deciding_policy(fresh_on, name)
    if now is None:
        return f"{name} no longer decides it on the API server, which decides {describe(fresh)}"
    then = deciding_policy(on, name)
    if then is None:  # a deletion its own inputs do not name: never confirmed
        return f"{name} decides nothing in the inputs the deletion was decided on"
    if then.uid != now.uid:
        return f"{name} was deleted and created again since the decision"
    if then.generation != now.generation:
        return (
            f"{name} changed since the decision (generation {then.generation}, "
            f"now {now.generation})"
        )
    if not isinstance(fresh, Delete) or fresh.policy != name:
        return f"the API server's view decides {describe(fresh)}"
    if (fresh.action, fresh.due_ns, fresh.propagation) != (
        decided.action,
        decided.due_ns,
        decided.propagation,
    ):
        return f"the API server's view decides another deletion: {describe(fresh)}"
    return None


def unreadable(problem: str | None) -> str:
    """Why a policy deletion may not go when the API server's view could not be read."""
    return f"the policies in force could not be read: {problem}"
