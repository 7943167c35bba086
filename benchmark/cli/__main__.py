"""``python -m benchmark.cli``: the ``prunebench`` command."""

from benchmark.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
