"""The decision path, wired in one place: writer, guardrails, accounting, executor, reconciler.

The composition root (``app/controller.py``) and the unit tests build the same path from the
same parts, so this function is the one place that says which part talks to which: the
reconciler decides (core plus the guardrails' facts), the accounting records, the executor
writes through the one writer, and the writer alone hands API answers back to the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from lifecycle_controller.controller.act.accounting import (
    Accounting,
    ActionMetrics,
    NoActionMetrics,
)
from lifecycle_controller.controller.act.execution import Executor
from lifecycle_controller.controller.act.observations import ObservationMetrics, ObservationWriter
from lifecycle_controller.controller.act.writes import ObjectApi, ObjectWriter
from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.controller.guardrails.breaker import CircuitBreaker
from lifecycle_controller.controller.guardrails.state import Guardrails, RestartPacing
from lifecycle_controller.controller.policy.decisions import PolicyDecisions
from lifecycle_controller.controller.policy.fence import FenceMetrics, PolicyFence, PolicyReads
from lifecycle_controller.controller.policy.places import StatusApi
from lifecycle_controller.controller.policy.references import ReferenceWatch
from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.controller.reconcile.reconciler import PassFacts, Reconciler
from lifecycle_controller.controller.rollout.tracker import RolloutTracker
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.core import Action, DecisionSettings, Ledger, ObjectKey
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.policy.limit import PolicyLimit
from lifecycle_controller.machinery.budget import ActionBudget
from lifecycle_controller.machinery.clock import Clock

__all__ = ["ReconcilerApi", "build_reconciler"]


class ReconcilerApi(ObjectApi, PolicyReads, Protocol):
    """The writer's requests and the policy fence's reads (``KubeClient`` has both)."""


def build_reconciler(
    *,
    api: ReconcilerApi,
    cache: MetadataCache,
    recorder: EventRecorder,
    clock: Clock,
    ledger: Ledger,
    settings: DecisionSettings,
    metrics: ActionMetrics | None = None,
    may_write: Callable[[], bool] = lambda: True,
    budgets: Mapping[Action, ActionBudget] | None = None,
    breaker: CircuitBreaker | None = None,
    rollouts: RolloutTracker | None = None,
    pacing: RestartPacing | None = None,
    namespace_defaults: Callable[[str | None], NamespaceDefaults | None] | None = None,
    observation_metrics: ObservationMetrics | None = None,
    policies: PolicyStore | None = None,
    fence_metrics: FenceMetrics | None = None,
    policy_default_limit: PolicyLimit | None = None,
    references: ReferenceWatch | None = None,
    on_limit_freed: Callable[[ObjectKey], None] = lambda key: None,
    places_api: StatusApi | None = None,
) -> Reconciler:
    """The reconciler and everything below it; ``settings.persist_observations`` turns on
    the ``never`` record writer; ``policies`` turns on lifecycle policies and the fence of
    policy deletions (the cache is built with the store as its policy views), with the
    reference index ``referencedBy`` reads (``references``; without it such conditions
    hold) and ``on_limit_freed``, told an object waiting in a policy's limit line that may
    take a place now; ``places_api`` records a limit's places in the policy's status before
    they are used."""
    writer = ObjectWriter(api, cache, clock, may_write=may_write)
    accounting = Accounting(recorder, ledger, clock.now_ns, metrics or NoActionMetrics())
    guardrails = Guardrails(
        cache,
        clock,
        budgets=budgets or {},
        breaker=breaker if breaker is not None and breaker.enabled else None,
        rollouts=rollouts,
        pacing=pacing or RestartPacing(),
    )
    fence = None
    if policies is not None:
        if cache.policy_views is not policies:
            raise ValueError("with policies, the cache is built with the store as its views")
        fence = PolicyFence(policies, api, clock, metrics=fence_metrics)
    observations = None
    if settings.persist_observations:
        observations = ObservationWriter(writer, observation_metrics)
    return Reconciler(
        cache=cache,
        writer=writer,
        facts=PassFacts(
            cache,
            writer,
            settings,
            ledger,
            guardrails,
            namespace_defaults=namespace_defaults,
            policies=(
                None
                if policies is None
                else PolicyDecisions(
                    policies,
                    cache,
                    writer,
                    default_limit=policy_default_limit,
                    references=references,
                    on_freed=on_limit_freed,
                    places=None if places_api is None else (places_api, clock),
                )
            ),
            fence=fence,
        ),
        executor=Executor(writer, accounting, recorder, rollouts, guardrails.breaker),
        guardrails=guardrails,
        accounting=accounting,
        clock=clock,
        observations=observations,
    )
