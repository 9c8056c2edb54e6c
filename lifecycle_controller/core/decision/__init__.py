"""The decision over one object's annotations: the outcomes a decision can have, the passes that
reach one (delete, restart, catch-up, windows, namespace defaults), the guardrails that may hold it,
and the Events and warnings it carries.
"""
