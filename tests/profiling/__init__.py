"""In-process profiling harnesses: they run the controller's own pieces inside one process.

They look inside the controller (its work queue, reconciler, cache), which a benchmark may not:
``benchmarks/`` measures the controller as a user runs it, a separate process on a real control
plane beside its floor, and may import only the package's public parts and the local control
plane. These harnesses answer a narrower question (what one reconcile costs, where the heap goes
while syncing) and are run on demand; ``tests/machinery/test_reconcile_cpu_bench.py`` keeps the
reconcile one working.
"""
