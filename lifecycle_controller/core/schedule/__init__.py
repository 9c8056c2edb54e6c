"""When things are due: recurring occurrences of a schedule, the catch-up rule for missed ones, and
maintenance windows. Pure functions of instants; the decision layer asks them.
"""
