"""Benchmark: data-parallel scaling of one run from 1 to N processes on this machine.

Trains the same run with each process count (``prunebench run --nproc N``) and prints the
global training images/s (warm-up iterations excluded), the speedup over one process and the
scaling efficiency (speedup / N). Target on GPUs: >= 0.9 x N.

    python -m benchmark.bench.parallel --nproc 1 2                          # CPU, digits
    python -m benchmark.bench.parallel --nproc 1 2 4 8 --set model.name=resnet50 \\
        --set data.name=imagenet --set data.root='data/photos' --set data.loader=gpu \\
        --set data.batch_size=256 --set budget.epochs=1 --set optim.bf16=true
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

from benchmark.config.parse import replace_section
from benchmark.store.results import Store
from benchmark.training.runner import run_local
from benchmark.training.validation import load_config

DEFAULTS = [
    "method.name=dense",
    "data.batch_size=256",
    "budget.epochs=3",
    "logging.progress=false",
    "runtime.threads=1",
]


def main(argv: list[str] | None = None) -> None:
    """Train one run with every ``--nproc`` count and print the images/s of each."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", nargs="?", help="a TOML run config (default: dense on digits)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--nproc", type=int, nargs="+", default=[1, 2])
    args = p.parse_args(argv)
    cfg = load_config(args.config, [*DEFAULTS, *args.overrides])
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.nproc:
            out = dataclasses.replace(cfg.output, dir=str(Path(tmp) / f"n{n}"))
            run = replace_section(cfg, output=out)
            run_local([run], n)
            record = Store(out.dir).read(run.run_id)
            assert record is not None
            ips = record["metrics"]["images_per_s"]
            base = base or ips
            dp = record["distributed"]
            print(
                f"{n} process(es) ({dp['devices']} device(s), {record['environment']['device']}): "
                f"{ips:9.0f} img/s  speedup {ips / base:5.2f}  efficiency {ips / base / n:5.1%}  "
                f"wall {record['metrics']['wall_seconds']:.1f} s"
            )


if __name__ == "__main__":
    main()
