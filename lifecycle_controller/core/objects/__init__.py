"""What the controller knows of Kubernetes objects, before any decision: the annotation keys,
resource
types and object keys, the watch scope, which changes are relevant, and what a rollout's status
says.
"""
