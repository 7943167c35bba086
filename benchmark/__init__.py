"""prunebench: a budgeted benchmark harness for neural-network pruning methods.

The packages, from the bottom up (each may import only the ones its docstring names, all below
it; ``tests/test_architecture.py`` holds the code to that):

- ``core``: errors, registries, TOML limits, atomic files;
- ``config``: the run config, its run id and the method registry;
- ``schedules``, ``pruning``, ``data``, ``models``, ``store``: learning rates, masks and criteria,
  datasets, architectures, the results store;
- ``measure``: metrics, FLOPs, measured latency;
- ``tasks``: loss and metrics per learning task;
- the top-level ``methods`` package: the pruning methods (plugins);
- ``training``: the budgeted harness that runs one config into the store;
- ``launch``: grids, SLURM and local submission, status;
- ``experiments``: the paper's tables and figures as specs;
- ``reporting``: tables, statistics, figures, export;
- ``cli``: the ``prunebench`` command; ``bench``: benchmark scripts.
"""

__version__ = "0.1.0"
