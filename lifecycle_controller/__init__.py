"""lifecycle-controller: carries out time-based lifecycle annotations on Kubernetes objects.

Operators annotate objects with ``lifecycle.cezary.dev/*`` keys (delete after a TTL or at a
time, restart workloads after a delay, at a time, every N or on a cron schedule); the
controller watches them and performs the actions. See README.md and docs/.
"""

__version__ = "0.1.0"
