"""Lifecycle policies: the model parsed from a LifecyclePolicy or ClusterLifecyclePolicy, its CEL
condition and that condition's cost bound, which objects a policy selects, the precedence among
policies and annotations, and the decision a winning policy makes.
"""
