"""The ``prunebench`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError, DatasetError

EXIT_USAGE = 2
EXIT_FAILURE = 1


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="a TOML run config (default: BIMP on digits)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. --set method.sparsity=0.95",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    from benchmark import experiments_cli, launch_cli, report_cli, schedule_cli

    parser = argparse.ArgumentParser(
        prog="prunebench", description="Budgeted benchmark of neural-network pruning methods."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="train one configured run (resumes from its checkpoint)")
    _add_config_args(run)
    run.add_argument("--resume", action="store_true", help="require and continue a checkpoint")
    run.add_argument("--force", action="store_true", help="rerun even if the run has finished")
    run.add_argument("--wandb", action="store_true", help="log to Weights & Biases (offline)")
    run.add_argument("--print-config", action="store_true", help="print the TOML and exit")
    run.add_argument("--json", action="store_true", help="print the whole result as JSON")
    run.add_argument(
        "--nproc",
        type=int,
        default=1,
        metavar="N",
        help="train with N data-parallel processes on this machine (each takes batch/N)",
    )

    demo = sub.add_parser("demo", help="the main job: a small comparison on digits")
    demo.add_argument("--store", default="results/runs", help="results store folder")
    demo.add_argument("--figure", default="results/figures/demo.png", help="figure path")
    demo.add_argument("--epochs", type=int, default=30, help="budget T of each run")
    demo.add_argument("--sparsity", type=float, default=0.9, help="goal sparsity")

    sub.add_parser("methods", help="list the registered methods and their properties")

    show = sub.add_parser("show", help="print a stored run")
    show.add_argument("run", help="run id or path to a result JSON")
    show.add_argument("--store", default="results/runs", help="results store folder")
    show.add_argument("--json", action="store_true", help="print the whole record as JSON")

    fake = sub.add_parser(
        "fake-data",
        help="write small stand-in dataset files in the real on-disk formats",
    )
    fake.add_argument(
        "dataset", choices=["cifar10", "cifar100", "imagenet", "coco", "cityscapes", "wmt16"]
    )
    fake.add_argument("--root", default="data", help="folder to write into (data.root)")
    fake.add_argument("--size", type=int, default=200, help="training images (CIFAR)")
    fake.add_argument("--signal", type=float, default=0.5, help="class signal in [0, 1) (CIFAR)")
    fake.add_argument(
        "--photos",
        action="store_true",
        help="imagenet: --size photograph-like 500x375 JPEGs (quality 90) for loader speed",
    )
    fake.add_argument("--classes", type=int, default=10, help="class folders (--photos)")

    schedule_cli.add_parser(sub)
    experiments_cli.add_parsers(sub)
    launch_cli.add_parsers(sub)
    report_cli.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``prunebench`` console script."""
    from benchmark.checkpoint import CorruptFileError
    from benchmark.store import RunLockedError

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as err:
        print(f"prunebench: config error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except DatasetError as err:
        print(f"prunebench: data error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except (RunLockedError, CorruptFileError) as err:
        print(f"prunebench: {err}", file=sys.stderr)
        return EXIT_FAILURE


def cmd_run(args: argparse.Namespace) -> int:
    """``prunebench run``: validate, then train (or report the finished result)."""
    from benchmark.config import config_to_toml
    from benchmark.distributed import RankFailed
    from benchmark.runner import ResumeError, execute
    from benchmark.validation import load_config

    overrides = list(args.overrides)
    if args.wandb:
        overrides.append("logging.wandb=true")
    cfg = load_config(args.config, overrides)
    if args.print_config:
        print(f"# run id: {cfg.run_id}")
        print(config_to_toml(cfg), end="")
        return 0
    try:
        if args.nproc == 1:
            record = execute(cfg, force=args.force, require_resume=args.resume)
        else:
            record = _run_parallel(cfg, args.nproc, force=args.force, resume=args.resume)
    except ResumeError as err:
        print(f"prunebench: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RankFailed as err:  # a rank of a data-parallel run failed (recorded in the store)
        print(f"prunebench: {err}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        print(format_summary(record))
    return 0


def _run_parallel(cfg: Any, nproc: int, *, force: bool, resume: bool) -> dict[str, Any]:
    """Train ``cfg`` with ``nproc`` local processes and return rank 0's stored record."""
    from benchmark.distributed import check_batch, run_local
    from benchmark.runner import ResumeError
    from benchmark.store import Store

    check_batch(cfg.data.batch_size, nproc)
    store = Store(cfg.output.dir)
    if resume and not store.checkpoint_path(cfg.run_id).exists():
        path = store.checkpoint_path(cfg.run_id)
        raise ResumeError(f"run {cfg.run_id} has no checkpoint at {path} to resume from")
    run_local([cfg], nproc, force=force, require_resume=resume)
    record = store.read(cfg.run_id)
    assert record is not None
    return record


def format_summary(record: dict[str, Any]) -> str:
    """A few lines describing a finished run."""
    m = record["metrics"]
    lines = [
        f"run {record['run_id']} ({record['method']}): {record['status']}",
        f"  test top-1      {m['test']['top1']:.4f}"
        + (f"   top-5 {m['test']['top5']:.4f}" if "top5" in m["test"] else ""),
        f"  val top-1       {m['val']['top1']:.4f}",
        *(f"  test {k:<11}{m['test'][k]:.4f}" for k in ("miou", "bleu") if k in m["test"]),
        f"  sparsity        {m['sparsity']:.4f} (prunable), {m['sparsity_total']:.4f} (all)",
        f"  speedup         {m['speedup']:.2f}x (corrected {m['speedup_corrected']:.2f}x)",
        f"  images/s        {m['images_per_s']:.0f}",
    ]
    if "stability" in m:
        lines.append(f"  stability       {m['stability']['pruning_stability']:.4f}")
    return "\n".join(lines)


def cmd_demo(args: argparse.Namespace) -> int:
    """``prunebench demo``: dense vs IMP (FT, ALLR) vs BIMP on digits; table and figure."""
    from benchmark.demo import run_demo

    run_demo(Path(args.store), Path(args.figure), epochs=args.epochs, sparsity=args.sparsity)
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    """``prunebench methods``: the paper's overview table for every registered method."""
    from methods import METHODS, load_methods

    load_methods()
    mark = {True: "yes", False: "no"}
    rows = []
    for name in METHODS.names():
        cls = METHODS.get(name)
        i = cls.info
        rows.append(
            (
                name,
                mark[i.sparsity_specifiable],
                mark[i.pruning_stable],
                mark[i.sparsity_agnostic],
                str(i.extra_hyperparameters),
                i.summary,
            )
        )
    header = (
        "method",
        "sparsity specifiable",
        "pruning stable",
        "sparsity agnostic",
        "add. hyperparameters",
        "summary",
    )
    print(_text_table(header, rows))
    return 0


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    """``prunebench show RUN``: a stored result."""
    from benchmark.store import Store

    path = Path(args.run)
    if path.suffix == ".json" and path.exists():
        record = json.loads(path.read_text())
    else:
        record = Store(args.store).read(args.run)
    if record is None:
        print(f"prunebench: no run {args.run!r} in {args.store}", file=sys.stderr)
        return EXIT_USAGE
    if args.json or record.get("status") != "finished":
        print(json.dumps(record, indent=2))
    else:
        print(format_summary(record))
    return 0


def cmd_fake_data(args: argparse.Namespace) -> int:
    """``prunebench fake-data``: stand-in dataset files for runs without the real data."""
    from benchmark import fakedata

    if not 0 <= args.signal < 1:
        raise ConfigError("--signal", args.signal, "a number in [0, 1)")
    if args.size < 10:
        raise ConfigError("--size", args.size, "an integer >= 10")
    if args.dataset == "cifar10":
        fakedata.write_cifar10(
            args.root, per_batch=args.size // 5, n_test=args.size // 5, signal=args.signal
        )
    elif args.dataset == "cifar100":
        fakedata.write_cifar100(
            args.root, n_train=args.size, n_test=args.size // 2, signal=args.signal
        )
    elif args.photos:
        if args.classes < 1:
            raise ConfigError("--classes", args.classes, "an integer >= 1")
        fakedata.write_imagenet_photos(args.root, n_train=args.size, classes=args.classes)
    else:
        fakedata.WRITERS[args.dataset](args.root)
    hint = (
        "data.check_integrity=false"
        if args.dataset.startswith("cifar")
        else f"data.name={args.dataset} --set data.root={str(args.root)!r}"
    )
    print(f"wrote a stand-in {args.dataset} under {args.root}; run with --set {hint}")
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    """``prunebench schedule``: learning rates as JSON, optionally drawn."""
    from benchmark import schedule_cli

    return schedule_cli.run(args)


def _experiment_commands() -> dict[str, Any]:
    from benchmark import experiments_cli

    return experiments_cli.COMMANDS


def _launch_commands() -> dict[str, Any]:
    from benchmark import launch_cli

    return launch_cli.COMMANDS


def _report_commands() -> dict[str, Any]:
    from benchmark import report_cli

    return report_cli.COMMANDS


COMMANDS = {
    "run": cmd_run,
    "demo": cmd_demo,
    "methods": cmd_methods,
    "show": cmd_show,
    "schedule": cmd_schedule,
    "fake-data": cmd_fake_data,
    **_experiment_commands(),
    **_launch_commands(),
    **_report_commands(),
}


if __name__ == "__main__":
    raise SystemExit(main())
