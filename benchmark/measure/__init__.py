"""Measuring a network: accuracy and sparsity metrics, theoretical FLOPs and speedup, measured
latency of dense, compacted and 2:4 semi-structured models, and timing a stored run.

May import: core, config, models, pruning, store.
"""
