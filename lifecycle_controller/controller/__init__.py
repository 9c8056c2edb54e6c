"""The running controller: what turns cluster state into carried-out lifecycle decisions.

Discovery picks the resource types, informers fill the metadata cache, the work queue's
workers run the reconciler, which asks the pure core for a decision and hands it to the
executor (one guarded write, its Events and metrics). The Lease elector gates all of it.

Its modules live in rooms (sub-packages), one job each, layered by import-linter contracts:
docs/architecture.md#controller-rooms says which room holds what.
"""
