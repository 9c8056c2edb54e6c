"""Fault scenarios on the real control plane (issue 8; docs/reliability.md)."""
