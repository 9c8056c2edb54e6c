"""One key decided once per pass: which change becomes work, the pass, its wiring.

The top room of the controller (docs/architecture.md#controller-rooms): it asks every room
below it and none asks it.
"""
