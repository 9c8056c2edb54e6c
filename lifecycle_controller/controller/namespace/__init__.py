"""What the controller knows of Namespaces: their defaults, their labels, their presence.

The rooms and their order: docs/architecture.md#controller-rooms.
"""
