"""``prunebench calibrate``, and the cost lines the dry runs of ``reproduce`` and ``submit`` print.

The cost of a plan (``benchmark.launch.estimate``) is printed per table row or method, for the
dense parents and in total: runs, missing runs, dataset passes, device-hours of what is missing
on one device, and the peak device memory where a run measured it. Hours come only from
measurements; without one the line says "unknown" and the command that measures it follows.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from benchmark.config.run import DEFAULT_STORE
from benchmark.core.errors import ConfigError

PRECISIONS = ("fp32", "bf16", "fp16")


def add_parsers(sub: Any) -> None:
    """Register ``calibrate`` on the ``prunebench`` sub-parser set."""
    cal = sub.add_parser(
        "calibrate",
        help="time a short run of each model on a device, for cost estimates (dry runs)",
        description="Train each model for a few timed iterations with the harness's own settings "
        "(captured steps and channels_last where the device allows, bf16 or fp16 with "
        "--precision) on synthetic batches of its dataset's shape, and keep the images/s (and peak "
        "device memory) in <store>/calibration/throughput.json, where the dry runs of "
        "reproduce and submit read them.",
    )
    cal.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    cal.add_argument(
        "--models",
        required=True,
        help="comma-separated MODEL or MODEL:DATASET (e.g. resnet56,wrn28_10:cifar100); a model "
        "alone is timed on the dataset the paper trains it on",
    )
    cal.add_argument(
        "--precision",
        default="fp32",
        help="comma-separated, of: fp32, bf16, fp16 (optim.bf16, optim.fp16)",
    )
    cal.add_argument("--batch", type=int, default=0, help="batch size (0: the paper's)")
    cal.add_argument("--steps", type=int, default=50, help="timed iterations (at least)")
    cal.add_argument(
        "--threads",
        type=int,
        default=0,
        help="CPU threads (0: the launcher's rule for one local run: the cores this process "
        "may use)",
    )
    cal.add_argument(
        "--repeats", type=int, default=3, help="timings per model (the median is kept)"
    )
    cal.add_argument("--store", default=DEFAULT_STORE, help="results store the file goes to")
    cal.add_argument(
        "--array",
        type=int,
        default=1,
        metavar="K",
        help="time K runs trained as one array model (submit --array K prices with it)",
    )
    add_array_layout(cal)


def add_array_layout(p: argparse.ArgumentParser) -> None:
    """The ``--array-layout`` option of the commands that train arrays (and calibrate them)."""
    from benchmark.training.array import LAYOUTS

    p.add_argument(
        "--array-layout",
        default=None,
        metavar="LAYOUT",
        help=f"with --array: how an array's forward runs its models, one of {', '.join(LAYOUTS)} "
        "(default: loop on the CPU; on a GPU grouped for the models it knows, else vmap). The "
        "layouts agree to float noise, so run ids do not depend on it; each record names it",
    )


def add_estimate_arg(p: argparse.ArgumentParser) -> None:
    """``--estimate-device``: the device a dry run's device-hours are for."""
    p.add_argument(
        "--estimate-device",
        default=None,
        metavar="DEVICE",
        help="with --dry-run: estimate device-hours for this measured device (cpu, cuda, or part "
        "of a GPU's name such as H100; default: the device measured for most of the plan)",
    )


def suggested_device(scale: str = "smoke", executor: str = "local") -> str:
    """The device a calibrate command should measure when nothing is measured yet: the GPU a
    paper-scale plan or a cluster job runs on, else this machine's (torch is loaded by now)."""
    import torch

    gpu = scale == "paper" or executor == "slurm" or torch.cuda.is_available()
    return "cuda" if gpu else "cpu"


def _precisions(text: str) -> list[str]:
    words = [w.strip() for w in text.split(",") if w.strip()]
    bad = [w for w in words if w not in PRECISIONS]
    if bad or not words:
        raise ConfigError(
            "--precision", bad[0] if bad else text, "comma-separated fp32, bf16, fp16"
        )
    return list(dict.fromkeys(words))


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``prunebench calibrate``: measure, print and keep the images/s of each model."""
    precisions = _precisions(args.precision)
    checks = (
        ("--batch", args.batch, 0),
        ("--steps", args.steps, 1),
        ("--repeats", args.repeats, 1),
        ("--array", args.array, 1),
    )
    for flag, value, low in checks:
        if value < low:
            raise ConfigError(flag, value, f"an integer >= {low}")
    if args.threads < 0:
        raise ConfigError("--threads", args.threads, "an integer >= 0")
    if args.array_layout is not None:
        from benchmark.training.array.fit import check_layout

        check_layout(args.array_layout, args.array)
    import torch

    from benchmark.launch.settings import LaunchSettings
    from benchmark.store.calibration import write_calibrations
    from benchmark.training.calibrate import calibrate, parse_targets

    targets = parse_targets(args.models)
    try:
        device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                              else "cpu" if args.device == "auto" else args.device)  # fmt: skip
    except RuntimeError:
        raise ConfigError("--device", args.device, "cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device", args.device, "cpu or auto (no CUDA device here)")
    command = "prunebench " + " ".join(sys.argv[1:]) if sys.argv[1:] else "prunebench calibrate"
    found = calibrate(
        targets,
        str(device),
        precisions=precisions,
        batch=args.batch or None,
        steps=args.steps,
        # The thread rule of a local run (LaunchSettings.run_threads), as plain `run` follows.
        threads=LaunchSettings(threads=args.threads).run_threads(),
        command=command,
        repeats=args.repeats,
        array=args.array,
        layout=args.array_layout,
    )
    path = write_calibrations(args.store, found)
    for c in found:
        peak = f", peak memory {_bytes(c.peak_memory_bytes)}" if c.peak_memory_bytes else ""
        spread = f"; {c.spread()}" if c.spread() else ""
        arrayed = f", {c.array} runs as one array, {c.layout} layout" if c.array > 1 else ""
        print(
            f"{c.model}/{c.dataset} ({c.precision}{arrayed}) on {c.device}: "
            f"{c.images_per_s:,.0f} images/s (batch {c.batch_size}, {c.timed_iterations} timed "
            f"iterations, {c.threads} thread{'' if c.threads == 1 else 's'}{peak}{spread})"
        )
    print(f"wrote {path}")
    return 0


def _bytes(n: int | None) -> str:
    return "-" if not n else f"{n / 2**30:.1f} GiB"


# Marks a lower bound in the cost table: hours priced at the dense rate, the largest peak
# memory measured while some workloads have none.
AT_LEAST = "≥ "
# Marks hours priced partly at another method's measured one-shot seconds.
ABOUT = "~ "


def _peak(line: Any) -> str:
    """A line's peak memory: ``-`` when nothing measured it, ``≥ x`` when part is unmeasured."""
    shown = _bytes(line.peak_bytes)
    return AT_LEAST + shown if line.peak_bytes and line.no_peak else shown


def token_text(n: int) -> str:
    """A token count in short: ``512``, ``24.6k``, ``1.3M``, ``2.1B``."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)


def _passes(passes: int, tokens: int, line: Any) -> str:
    """A line's passes, and its one-shot forward tokens where it has one-shot runs."""
    if not tokens and not line.uncounted:
        return f"{passes:,}"
    shown = "not counted" if line.uncounted else f"{token_text(tokens)} tok"
    return f"{passes:,} + {shown}" if passes else shown


def _token_lines(total: Any) -> list[str]:
    """What the one-shot tokens count, what is not counted and what is priced by seconds."""
    if not total.tokens and not total.uncounted:
        return []
    out = [
        "  tok = forward tokens of the one-shot prunes: calibration windows x data.max_length "
        "(per calibration pass) and evaluation windows x data.max_length (test twice, "
        "validation once)"
    ]
    if total.uncounted:
        names = ", ".join(sorted(total.uncounted))
        out.append(
            f"  not counted = the evaluation windows of {names}: its files (or its tokenizer) "
            "are not here, and the count needs the tokenised text"
        )
    if total.setup_by_seconds:
        names = ", ".join(sorted(w.text() for w in total.setup_by_seconds))
        out.append(
            f"  one-shot prunes of {names} priced at finished runs' seconds per run (no "
            "finished run recorded its tokens, or the run's tokens are not counted)"
        )
    return out


def _hours(h: float) -> str:
    # Smoke plans cost seconds: two significant digits rather than "0.0".
    return f"{h:.2g}" if h < 1 else f"{h:,.1f}" if h < 100 else f"{h:,.0f}"


def cost_text(
    groups: Mapping[str, Sequence[Any]],
    finished: set[str],
    store: str,
    *,
    device: str | None = None,
    heading: str = "",
    records: Sequence[Mapping] | None = None,
    suggest: str = "cuda",
    array: int = 1,
    parents: Any = None,
    layout: str | None = None,
) -> tuple[str, Any]:
    """The cost lines of ``groups`` of (run id, config) (and their dense parents), and the
    estimate.

    ``device``: the ``--estimate-device`` asked for (None: the best-measured device);
    ``suggest``: the device the calibrate command names when nothing is measured; ``array``:
    runs trained as arrays of up to that many (``--array``), priced at a calibrated array rate
    of their ``layout`` (``--array-layout``; None: the device's default); ``parents``: the runs'
    parents where the caller keeps them (``training.passes.Parents``).
    """
    from benchmark.core.textwidth import fit_table, width_of
    from benchmark.launch.estimate import Throughputs, estimate, workload
    from benchmark.training.passes import Parents, has_setup_phase

    throughputs = Throughputs.of_store(store, records)
    workloads = {workload(c) for pairs in groups.values() for _, c in pairs}
    chosen = throughputs.choose_device(workloads, device)
    parents = Parents() if parents is None else parents
    finished = finished | stored_parents(groups, parents, store)
    est = estimate(groups, finished, throughputs, chosen, array, parents, layout)
    where = chosen or (f"{device} (not measured)" if device else "no measured device")
    what = "training steps at measured images/s"
    if any(has_setup_phase(c) for pairs in groups.values() for _, c in pairs):
        what += ", one-shot prunes at the measured tokens/s (else seconds) of finished ones"
    lines = [f"cost{heading}, device-hours on {where} ({what}):"]
    header = ("", "runs", "missing", "passes", "passes to run", "device-hours to run", "peak mem")
    rows = [header]
    for line in [*est.lines, est.total]:
        hours = _hours(line.hours) if line.known else "unknown"
        if line.known and line.at_dense_rate:
            hours = AT_LEAST + hours
        elif line.known and line.setup_from_other:
            hours = ABOUT + hours
        rows.append(
            (
                line.label,
                f"{line.runs:,}",
                f"{line.missing:,}",
                _passes(line.passes, line.tokens, line),
                _passes(line.missing_passes, line.missing_tokens, line),
                hours,
                _peak(line) + (" (est.)" if line.peak_estimated else ""),
            )
        )
    lines.append(fit_table(rows, width_of(), align="lrrrrrr", margin="  "))
    total = est.total
    if total.known:
        bound = "at least " if total.at_dense_rate else ""
        tokens = f" (+ {token_text(total.tokens)} one-shot tokens)" if total.tokens else ""
        lines.append(
            f"  the whole plan: {total.passes:,} passes{tokens}, {bound}{_hours(total.all_hours)} h"
        )
    for w, source in sorted(est.sources.items(), key=lambda kv: kv[0].text()):
        lines.append(f"  images/s of {w.text()}: {source}")
    lines += _token_lines(total)
    lines += _bound_lines(total, chosen, suggest)
    lines += _unknown_lines(est, store, device or chosen, suggest)
    lines += _no_array_lines(total, store, device or chosen, suggest, array, layout)
    return "\n".join(lines), est


def _no_array_lines(
    total: Any, store: str, device: str | None, suggest: str, array: int, layout: str | None
) -> list[str]:
    """With ``--array K``: the workloads whose runs would train in arrays that no calibrated
    array rate prices (they are priced at a run's own rate, or unknown), and the command
    that measures one."""
    if array <= 1 or not total.no_array:
        return []
    names = ", ".join(sorted(w.text() for w in total.no_array))
    asked = f" ({layout} layout)" if layout else ""
    flags = f" --array {array}" + (f" --array-layout {layout}" if layout else "")
    out = [
        f"  --array {array}: no array rate measured for {names} on {device or 'any device'}"
        f"{asked}: their runs in arrays are priced at a run's own rate where one is measured; "
        "measure arrays with"
    ]
    return out + _calibrate_commands(total.no_array, store, device or suggest, flags)


def _calibrate_commands(workloads: Any, store: str, device: str, flags: str = "") -> list[str]:
    """The ``prunebench calibrate`` commands (one per precision) that measure ``workloads``
    (those calibrate can time) on ``device``'s kind, with ``flags``."""
    from benchmark.training.calibrate import DATASET_INPUTS

    target = "cpu" if device.lower() == "cpu" else "cuda"
    commands = []
    for precision in PRECISIONS:
        models = sorted(
            f"{w.model}:{w.dataset}"
            for w in workloads
            if w.precision == precision and w.dataset in DATASET_INPUTS
        )
        if models:
            extra = "" if precision == "fp32" else f" --precision {precision}"
            commands.append(
                f"    prunebench calibrate --device {target} --models {','.join(models)}"
                f"{extra}{flags} --store {store}"
            )
    return commands


def stored_parents(groups: Mapping[str, Sequence[Any]], parents: Any, store: str) -> set[str]:
    """The dense parents of ``groups``' runs that the store holds finished (a plan lists its
    own runs only: its parents count as stored, not missing, once they are)."""
    from benchmark.store.results import Store

    found = {p[0] for pairs in groups.values() for rid, c in pairs if (p := parents.of(rid, c))}
    held = Store(store)
    return {pid for pid in found if held.is_finished(pid)}


def _bound_lines(total: Any, chosen: str | None, suggest: str) -> list[str]:
    """What the figures are not: a CPU price of a GPU plan, lower bounds, unmeasured memory."""
    out = []
    if total.known and total.setup_from_other:
        names = ", ".join(sorted(total.setup_from_other))
        out.append(
            f"  {ABOUT.strip()} = about: the one-shot prunes of {names} priced at another "
            "method's measured seconds on the same model (none of theirs has finished here)"
        )
    if chosen is not None and not chosen.startswith("cuda") and suggest == "cuda":
        out.append(
            f"  priced on {chosen}, the only device measured, although this plan runs on GPUs "
            "(a GPU profile, a cluster job or paper scale): these are CPU hours, not GPU hours; "
            "calibrate on one of its GPUs for GPU hours"
        )
    if total.known and total.at_dense_rate:
        names = ", ".join(sorted(total.at_dense_rate))
        out.append(
            f"  {AT_LEAST.strip()} = at least: {names} priced at the images/s of the dense "
            "harness (a calibration times dense training); most methods train slower, so these "
            "hours are a lower bound until a finished run of the method is in the store"
        )
    if total.no_peak:
        names = ", ".join(sorted(w.text() for w in total.no_peak))
        if chosen is None:
            why = "nothing measured it yet; only GPU runs and GPU calibrations record peak memory"
        elif not chosen.startswith("cuda"):
            why = "measured on CUDA devices only; a CPU run or calibration records none"
        else:
            why = "no run or calibration of it on this device recorded one"
        out.append(f"  peak mem - = not measured for {names}: {why}")
        if total.peak_bytes:
            out.append(
                f"  peak mem of the total: the largest measured is {_bytes(total.peak_bytes)}; "
                f"unknown for {names}, so the plan's peak may be higher"
            )
    return out


def _unknown_lines(est: Any, store: str, device: str | None, suggest: str) -> list[str]:
    """Why hours are unknown, and the commands that measure what is missing."""
    out = []
    if est.total.no_setup:
        names = ", ".join(sorted(w.text() for w in est.total.no_setup))
        out.append(
            f"  device-hours unknown: no finished one-shot run of {names} on "
            f"{device or 'any device'} measured its loading, prune and evaluation; any run of "
            "the plan measures them (a spec's dry run names one below, with its command), and "
            "the other methods are priced at it (~) until runs of theirs have finished"
        )
    if est.total.no_size:
        names = ", ".join(sorted(est.total.no_size))
        out.append(
            f"  device-hours unknown: the training-set size of {names} is known only from a "
            "finished run of it in the store"
        )
    unknown = est.unknown()
    if not unknown:
        return out
    from benchmark.training.calibrate import DATASET_INPUTS

    where = device or "any device"
    names = ", ".join(w.text() for w in sorted(unknown, key=lambda w: w.text()))
    commands = _calibrate_commands(unknown, store, device or suggest)
    measure = "; measure with" if commands else ""
    out.append(f"  device-hours unknown: no measured images/s of {names} on {where}{measure}")
    out += commands
    others = sorted(w.text() for w in unknown if w.dataset not in DATASET_INPUTS)
    if others:
        out.append(
            f"    {', '.join(others)}: prunebench calibrate does not time this task; one epoch "
            "of a real run (prunebench run with --set budget.epochs=1) stores a measurement"
        )
    return out


COMMANDS = {"calibrate": cmd_calibrate}
