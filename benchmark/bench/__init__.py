"""Benchmark scripts: they print figures and assert nothing (speed targets live here, never in
tests). ``python -m benchmark.bench`` is the training throughput benchmark; the others are
``python -m benchmark.bench.<name>``: ``pipeline``, ``pack``, ``loader``, ``parallel``,
``speedup``, ``submit``, ``tables``, ``free_time``, ``weights``, ``final_write``,
``profile_pipeline``, ``seedstats_sim``, ``cli_times``, ``check_fast_path`` and ``llm_memory``.

May import: core, config, schedules, pruning, data, models, store, measure, tasks, methods,
training, launch, experiments, reporting.
"""
