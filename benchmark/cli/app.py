"""The ``prunebench`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.cli.fast_parser import Parser
from benchmark.cli.output import add_width
from benchmark.cli.summary import format_summary
from benchmark.core.errors import ConfigError, DatasetError

EXIT_USAGE = 2


EXIT_FAILURE = 1


EXIT_INTERRUPTED = 130  # the shell's code for a process ended by SIGINT


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="a TOML run config (default: BIMP on digits)")
    _add_set_arg(p, "override one config value (repeatable), e.g. --set method.sparsity=0.95")


def _add_set_arg(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=help_text,
    )


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is invalid; allowed: an integer >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    from benchmark.cli import costs as costs_cli
    from benchmark.cli import experiments as experiments_cli
    from benchmark.cli import export_model as export_model_cli
    from benchmark.cli import launch as launch_cli
    from benchmark.cli import listing as listing_cli
    from benchmark.cli import report as report_cli
    from benchmark.cli import schedules as schedule_cli
    from benchmark.cli import storage as storage_cli

    parser = Parser(
        prog="prunebench", description="Budgeted benchmark of neural-network pruning methods."
    )
    # A metavar, not argparse's {run,demo,...} of every name: that one line was 170 columns.
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="train one configured run (resumes from its checkpoint)")
    _add_config_args(run)
    run.add_argument("--resume", action="store_true", help="require and continue a checkpoint")
    run.add_argument("--force", action="store_true", help="rerun even if the run has finished")
    run.add_argument("--wandb", action="store_true", help="log to Weights & Biases (offline)")
    run.add_argument("--print-config", action="store_true", help="print the TOML and exit")
    run.add_argument("--json", action="store_true", help="print the whole result as JSON")
    run.add_argument(
        "--nproc",
        type=positive_int,
        default=1,
        metavar="N",
        help="train with N data-parallel processes on this machine (each takes batch/N)",
    )

    demo = sub.add_parser("demo", help="the main job: a small comparison on digits")
    demo.add_argument("--store", default="results/runs", help="results store folder")
    demo.add_argument("--figure", default="results/figures/demo.png", help="figure path")
    demo.add_argument("--epochs", type=int, default=30, help="budget T of each run")
    demo.add_argument("--sparsity", type=float, default=0.9, help="goal sparsity")
    demo.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads of every run (0: runtime.threads as set, else torch's default)",
    )
    _add_set_arg(demo, "override a value of every demo run (repeatable), e.g. data.batch_size=32")

    methods = sub.add_parser(
        "methods",
        help="list the registered methods; with NAME, every key (type, default, meaning) and "
        "the presets",
    )
    methods.add_argument("name", nargs="?", help="a method: its keys, meanings and presets")
    methods.add_argument(
        "--markdown", action="store_true", help="print the method list of methods/README.md instead"
    )

    check = sub.add_parser(
        "check-method",
        help="run the method contract (budget, exact sparsity, resume, ...) on digits",
        description="Train each named method briefly on digits and check the contract every "
        "method must pass: within the budget, exact goal sparsity, stored metrics match the "
        "weights, determinism, exact resume, hard masks hold. Exit status 1 if a check fails.",
    )
    check.add_argument("names", nargs="+", metavar="NAME", help="registered method names")
    _add_set_arg(check, "extra override of the contract's config, e.g. method.parent_epochs=1")
    check.add_argument(
        "--workdir", default=None, help="keep the runs here (default: a temporary folder)"
    )

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
    listing_cli.add_parsers(sub)
    launch_cli.add_parsers(sub)
    report_cli.add_parsers(sub)
    storage_cli.add_parsers(sub)
    costs_cli.add_parsers(sub)
    export_model_cli.add_parsers(sub)
    add_width(parser)
    _show_defaults(parser)
    return parser


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default in --help, except the uninformative None and False."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False) or action.default == []:
            return action.help
        return super()._get_help_string(action)


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _show_defaults(sub)


# Errors about what to show (a table or figure id) rather than about a run's config.
_ID_FIELDS = ("experiment id", "table id", "figure id", "table id with --paper")


def set_syntax_hint(argv: Sequence[str]) -> ConfigError | None:
    """The config error of a ``--set`` written without ``=`` (``--set method.sparsity 0.9``),
    in the one form of every bad input, with the fix."""
    for i, word in enumerate(argv):
        if word != "--set" or i + 1 >= len(argv) or "=" in argv[i + 1]:
            continue
        key = argv[i + 1]
        value = argv[i + 2] if i + 2 < len(argv) and not argv[i + 2].startswith("-") else None
        example = f"--set {key}={value}" if value is not None else f"--set {key}=VALUE"
        return ConfigError("--set", key, f"section.key=value in one word (no spaces): {example}")
    return None


def _config_error(err: ConfigError) -> int:
    """Say what is wrong with a value ("config error: F = V is invalid; allowed: ...")."""
    kind = "error" if err.field in _ID_FIELDS else "config error"
    print(f"prunebench: {kind}: {err}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``prunebench`` console script."""
    from benchmark.cli.output import fitted_streams

    argv = list(sys.argv[1:] if argv is None else argv)
    hint = set_syntax_hint(argv)
    if hint is not None:
        with fitted_streams(argparse.Namespace(command="", width=None)):
            return _config_error(hint)
    args = build_parser().parse_args(argv)
    with fitted_streams(args):  # errors too: every line fits the width
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; the errors a user can act on as one line, not a traceback."""
    from benchmark.cli.collector import paused_collector, trains_nothing
    from benchmark.core.errors import CorruptFileError
    from benchmark.store.errors import RunLockedError

    try:
        with paused_collector(trains_nothing(args)):
            code = COMMANDS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
        return code
    except ConfigError as err:
        return _config_error(err)
    except DatasetError as err:
        print(f"prunebench: data error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        # The reader went away (``prunebench list | head``): stop quietly, as Unix tools do.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE
    except (RunLockedError, CorruptFileError) as err:
        print(f"prunebench: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as err:  # a write the filesystem refused: the file, why and the fix
        from benchmark.store.errors import storage_error

        line = storage_error(err)
        if line is None:
            raise
        print(f"prunebench: {line}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        # Ctrl-C is a user's choice, not a crash: no traceback; say how the work continues.
        trains = args.command in ("run", "demo", "reproduce")
        again = " (the same command resumes from the last epoch checkpoint)" if trains else ""
        print(f"prunebench: interrupted{again}", file=sys.stderr)
        return EXIT_INTERRUPTED


def cmd_run(args: argparse.Namespace) -> int:
    """``prunebench run``: validate, then train (or report the finished result)."""
    from benchmark.config.parse import config_to_toml
    from benchmark.training.distributed import RankFailed
    from benchmark.training.runner import ResumeError, execute
    from benchmark.training.validation import load_config

    overrides = list(args.overrides)
    if args.wandb:
        overrides.append("logging.wandb=true")
    cfg = load_config(args.config, overrides)
    if args.print_config:
        print(f"# run id: {cfg.run_id}")
        print(f"# what each [method] key means: prunebench methods {cfg.method.name}")
        print(config_to_toml(cfg), end="")
        return 0
    if not cfg.runtime.threads:
        cfg = _local_threads(cfg, args.nproc)
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


def _local_threads(cfg: Any, nproc: int) -> Any:
    """``cfg`` with the torch threads the launcher gives a local run that leaves them at 0
    (its share of the cores: :meth:`LaunchSettings.run_threads`); not part of the run id."""
    import dataclasses

    from benchmark.config.parse import replace_section
    from benchmark.launch.settings import LaunchSettings

    threads = LaunchSettings(workers=nproc).run_threads(cfg.runtime.threads)
    return replace_section(cfg, runtime=dataclasses.replace(cfg.runtime, threads=threads))


def _run_parallel(cfg: Any, nproc: int, *, force: bool, resume: bool) -> dict[str, Any]:
    """Train ``cfg`` with ``nproc`` local processes and return rank 0's stored record."""
    from benchmark.store.results import Store
    from benchmark.training.process_checks import check_batch
    from benchmark.training.runner import ResumeError, run_local

    check_batch(cfg.data.batch_size, nproc)
    store = Store(cfg.output.dir)
    if resume and not store.checkpoint_path(cfg.run_id).exists():
        path = store.checkpoint_path(cfg.run_id)
        raise ResumeError(f"run {cfg.run_id} has no checkpoint at {path} to resume from")
    run_local([cfg], nproc, force=force, require_resume=resume)
    record = store.read(cfg.run_id)
    assert record is not None
    return record


def cmd_demo(args: argparse.Namespace) -> int:
    """``prunebench demo``: dense vs IMP (FT, ALLR) vs BIMP on digits; table and figure."""
    from benchmark.cli.demo import run_demo

    run_demo(
        Path(args.store),
        Path(args.figure),
        epochs=args.epochs,
        sparsity=args.sparsity,
        overrides=demo_overrides(args),
    )
    return 0


def demo_overrides(args: argparse.Namespace) -> list[str]:
    """The demo runs' overrides: ``--set`` values, then ``--threads`` when given (0 leaves a
    ``--set runtime.threads`` alone: an unset flag never overrides what the user wrote)."""
    threads = [f"runtime.threads={args.threads}"] if args.threads else []
    return [*args.overrides, *threads]


def cmd_methods(args: argparse.Namespace) -> int:
    """``prunebench methods [NAME]``: the overview table, or one method's keys and presets."""
    import dataclasses

    from benchmark.cli import method_docs
    from methods import METHODS, load_methods

    load_methods()
    if args.name is not None:
        print(method_docs.describe(args.name))
        return 0
    if args.markdown:
        print(method_docs.markdown_table(METHODS.names()), end="")
        return 0
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
                str(len(dataclasses.fields(cls.Params))),
                i.summary,
            )
        )
    header = (
        "method",
        "sparsity specifiable",
        "pruning stable",
        "sparsity agnostic",
        "paper's add. hyperparameters",
        "own keys",
        "summary",
    )
    from benchmark.core.textwidth import fit_table, width_of

    print(fit_table([header, *rows], width_of(), align="lllllrl", rule=True, prose=True))
    print("\nprunebench methods NAME: every [method] key of NAME with its meaning, and its presets")
    return 0


def cmd_check_method(args: argparse.Namespace) -> int:
    """``prunebench check-method NAME...``: the method contract, one line per check."""
    import tempfile

    from benchmark.training.contract import check_method
    from methods import get_method

    for name in args.names:
        get_method(name)  # an unknown name is a config error before any training
    failed = 0
    results_all: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="prunebench-contract-") as tmp:
        root = Path(args.workdir) if args.workdir else Path(tmp)
        for name in args.names:
            results = check_method(name, root / name, args.overrides)
            for r in results:
                print(r.line(), flush=True)
            failed += sum(not r.passed for r in results)
            results_all += results
    skipped = sum(r.skipped for r in results_all)
    note = f" ({skipped} skipped: nothing to check, see SKIP lines)" if skipped else ""
    print(f"{failed} check(s) failed{note}" if failed else f"every check passed{note}")
    return EXIT_FAILURE if failed else 0


def cmd_show(args: argparse.Namespace) -> int:
    """``prunebench show RUN``: a stored result."""
    from benchmark.store.results import Store

    path = Path(args.run)
    if path.suffix == ".json" and path.exists():
        from benchmark.core.errors import CorruptFileError
        from benchmark.store.errors import CorruptRecord
        from benchmark.store.records import read_record

        try:
            record = read_record(path)  # a FIFO or a device is refused, never read
        except CorruptRecord as err:
            raise CorruptFileError(path, str(err)) from None
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
    from benchmark.data import fakedata

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
    from benchmark.cli import schedules as schedule_cli

    return schedule_cli.run(args)


def _group_commands() -> dict[str, Any]:
    """The subcommands of the modules that hold one group each (experiments, listing, ...)."""
    import importlib

    found: dict[str, Any] = {}
    groups = ("experiments", "listing", "launch", "report", "storage", "costs", "export_model")
    for group in groups:
        found.update(importlib.import_module(f"benchmark.cli.{group}").COMMANDS)
    return found


COMMANDS = {
    "run": cmd_run,
    "demo": cmd_demo,
    "methods": cmd_methods,
    "check-method": cmd_check_method,
    "show": cmd_show,
    "schedule": cmd_schedule,
    "fake-data": cmd_fake_data,
    **_group_commands(),
}


if __name__ == "__main__":
    raise SystemExit(main())
