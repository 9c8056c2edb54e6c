"""Lease-based leader election: the elector and the Lease record it reads and writes.

The rooms and their order: docs/architecture.md#controller-rooms.
"""
