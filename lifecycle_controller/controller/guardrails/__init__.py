"""The guardrails' state (facts, holds' effects, reservations) and the circuit breaker.

The pure check is :mod:`lifecycle_controller.core.decision.guardrails`; what it decides on
lives here (docs/architecture.md#controller-rooms).
"""
