"""The budgeted training harness: validation of a whole config against the registries, the
trainer (epochs, method hooks, evaluation, checkpoints), captured CUDA-graph steps, data-parallel
processes, and :func:`~benchmark.training.runner.execute`, which runs one config into the store.

May import: core, config, schedules, pruning, data, models, store, measure, tasks, methods.
"""
