"""prunebench: a budgeted benchmark harness for neural-network pruning methods."""

__version__ = "0.1.0"
