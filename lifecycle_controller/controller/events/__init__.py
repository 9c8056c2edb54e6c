"""Kubernetes Events: the recorder, Events written in the background, webhook notifications.

The rooms and their order: docs/architecture.md#controller-rooms.
"""
