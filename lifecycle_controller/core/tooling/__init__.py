"""The engine of the read-only tools (``plan``, ``explain``, ``policies try``): it runs the same
decision
over manifests or a cache snapshot and describes it. Only the tools import it.
"""
