"""The compatibility suite: the controller against each pinned Kubernetes release."""
