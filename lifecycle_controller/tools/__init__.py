"""Operator tools beside ``run``: ``plan`` (offline), ``status`` (live), their report, ``demo``."""
