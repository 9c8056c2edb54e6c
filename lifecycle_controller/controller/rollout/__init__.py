"""Following the rollouts that restarts start: the tracker, its batched reads, its watch.

The rooms and their order: docs/architecture.md#controller-rooms.
"""
