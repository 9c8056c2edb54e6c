"""What a policy's ``namespaceSelector`` made of an object's Namespace, in words.

``plan``, ``policies try`` and ``explain`` show which part of a policy decided; for a
``namespaceSelector`` that part is the Namespace's labels, not the object's:
``namespace team-a labels match env=preview``. Matching itself is
:func:`~lifecycle_controller.core.policy.match.namespace_refusal`; this module only says it.
"""

from __future__ import annotations

from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.core.policy.model import Policy

__all__ = ["namespace_selection"]


def namespace_selection(policy: Policy, view: ObjectView) -> str:
    """``namespace NS labels match SELECTOR`` (or do not, or are not known); "" when the
    policy has no namespaceSelector or the object is cluster-scoped."""
    selector = policy.namespace_selector
    if selector is None or view.namespace is None:
        return ""
    shown = selector.query() or "{} (every namespace)"
    if view.namespace_labels is None:
        return f"namespace {view.namespace} labels are not known (namespaceSelector {shown})"
    verb = "match" if selector.matches(view.namespace_labels) else "do not match"
    return f"namespace {view.namespace} labels {verb} {shown}"
