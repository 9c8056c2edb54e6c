"""The verdict of one reconcile pass: the one pure call between the facts and the writes.

Above the policy and decision rooms: it takes every fact a pass gathered (the object, its
namespace's defaults, the policies resolved for it, the guardrails' state) and returns the
final decision, a guardrail's hold included, or the one fact it still lacks.
"""
