"""The workers that run reconciles off the work queue, and their contract (``Result``...).

The rooms and their order: docs/architecture.md#controller-rooms.
"""
