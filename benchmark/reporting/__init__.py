"""From a store to the paper's tables and figures: selection by validation, aggregation over
seeds, seed statistics, rendering (Markdown, LaTeX, CSV), figures, export and the cost view.

May import: core, config, schedules, store, measure, experiments, methods.
"""
