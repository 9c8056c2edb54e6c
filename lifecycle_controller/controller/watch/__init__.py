"""The informers and the shared metadata cache they fill.

Discovery of the watch set, the informer set, the one reflector loop (its projection, ports
and recovery table), the cache's keeper and scoped relists
(docs/architecture.md#controller-rooms).
"""
