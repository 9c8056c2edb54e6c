"""The lifecycle policies in force and what they decide: store, decisions, fence, status.

Also each policy's limit and tallies, ``matchedAt`` (in memory and persisted) and the
reference index a condition's ``referencedBy`` reads (docs/architecture.md#controller-rooms).
"""
