"""The Go-compatible text layer: how the reference reads and writes durations, timestamps, globs,
cron expressions, label selectors and quoted values, so every annotation and Event text matches it.
It knows nothing of objects or decisions.
"""
