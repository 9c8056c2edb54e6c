"""Carrying one decision out: the executor, the one writer of objects, the accounting.

And the persisted ``never`` observation (docs/architecture.md#controller-rooms).
"""
