"""What a plan costs before any compute: runs, dataset passes and device-hours.

**Dataset passes** (epochs over the training set, i.e. GPU-epochs on one device) of a run: the
epochs its method trains (``Method.total_epochs``: BIMP's initial training and cycles, IMP's
retraining, ...) plus its post-training fine-tuning (``finetune.epochs``). A dense parent that
runs start from (``Method.parent_config``) is a run of its own, counted once.

**Device-hours** of a run: passes x training images per pass / images per second / 3600, for one
device; a run with a setup phase (a language model's loading, one-shot prune and evaluations)
adds its forward tokens (calibration and evaluation, ``training.forward_tokens``) over the
tokens/s of finished runs of its workload on the device, else their seconds
(:mod:`benchmark.launch.oneshot_cost`). The images per second are measured, never
assumed, and come in this order from

1. finished runs in the store of the same model, dataset, precision (fp32/bf16) and device (the
   same method's runs first, since some methods train slower per image than others);
2. the store's calibration file (``prunebench calibrate``: a short timed run of the model with
   the pipeline's real settings);

and otherwise the hours are "unknown", with the command that measures them. The figure counts
training steps only: evaluation, checkpoints, CUDA-graph capture and process start-up come on
top (a few percent of a CIFAR epoch on a GPU). Training images per pass come from a finished
run's record, else from the dataset's published training-set size less the validation split.

An estimate reads JSON files and asks the methods for their epochs and dense parents (so it loads
them, as every plan of a spec does already); it trains and times nothing.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from benchmark.config.run import RunConfig
from benchmark.launch.oneshot_cost import OneShotTimes
from benchmark.store.calibration import calibration_path, read_calibrations
from benchmark.store.results import FINISHED, Store
from benchmark.training.forward_tokens import oneshot_tokens
from benchmark.training.passes import (
    Parents,
    has_setup_phase,
    model_label,
    precision_label,
    run_passes,
)

# Published training-set sizes (before the harness's validation split): CIFAR-10/100 50,000
# each; ImageNet-1k 1,281,167; CityScapes fine 2,975; digits: the 80% training part of
# scikit-learn's 1,797 images. COCO (the VOC-category subset left after filtering) and WMT16
# (token-length filtering) are known only from a stored run of them.
TRAIN_SET = {
    "digits": 1_437,
    "cifar10": 50_000,
    "cifar100": 50_000,
    "imagenet": 1_281_167,
    "cityscapes": 2_975,
}
DENSE_PARENTS = "dense parents"


@dataclass(frozen=True)
class Workload:
    """What a throughput measurement is of: a model on a dataset at a precision."""

    model: str
    dataset: str
    precision: str

    def text(self) -> str:
        """E.g. ``resnet56/cifar10 (fp32)``."""
        return f"{self.model}/{self.dataset} ({self.precision})"


def workload(cfg: RunConfig) -> Workload:
    """The workload a run trains."""
    return Workload(
        model_label(cfg.model.name, cfg.model.pretrained),
        cfg.data.name,
        precision_label(cfg.model.dtype, cfg.optim.precision()),
    )


def images_per_pass(cfg: RunConfig) -> int | None:
    """Training images per epoch from the dataset's size less the validation split (None for a
    dataset whose size is not known before a run of it)."""
    if cfg.data.epoch_iters > 0:  # language models: an epoch is a number of iterations
        return cfg.data.epoch_iters * cfg.data.batch_size
    n = TRAIN_SET.get(cfg.data.name)
    if n is None:
        return None
    # The validation split as benchmark.data.seeding.stratified_split draws it.
    n_val = min(max(round(cfg.data.val_fraction * n), 1), n - 1)
    return math.ceil((n - n_val) * cfg.data.epoch_fraction)


def device_label(environment: Mapping[str, object]) -> str:
    """``cpu``, or ``cuda (NVIDIA H200)``: the device a run was timed on."""
    kind = str(environment.get("device", "unknown")).split(":")[0]
    name = environment.get("device_name")
    return f"{kind} ({name})" if kind == "cuda" and name else kind


@dataclass(frozen=True)
class Measurement:
    """Images per second of a workload on a device, and where the figure comes from."""

    images_per_s: float
    source: str
    peak_memory_bytes: int | None = None
    images_per_epoch: int | None = None
    # A calibration times the dense harness: for another method it is a lower bound on time.
    dense_harness: bool = False
    array: int = 1  # the runs of the array it was timed in (1: a run alone)


@dataclass
class Throughputs:
    """Every measurement a store holds: its finished runs' and its calibration file's."""

    # (workload, device, method or "") -> images/s of each finished run
    runs: dict[tuple[Workload, str, str], list[float]] = field(default_factory=dict)
    peaks: dict[tuple[Workload, str], int] = field(default_factory=dict)
    epoch_images: dict[Workload, int] = field(default_factory=dict)
    calibrated: dict[tuple[Workload, str], Measurement] = field(default_factory=dict)
    # (workload, device) -> (array size, layout) -> images/s of all the array's runs
    # (calibrate --array)
    arrays: dict[tuple[Workload, str], dict[tuple[int, str], Measurement]] = field(
        default_factory=dict
    )
    # The setup phases (a language model's loading, one-shot prune and evaluations) of
    # finished runs: their seconds and tokens/s.
    oneshot: OneShotTimes = field(default_factory=OneShotTimes)

    @classmethod
    def of_store(cls, store: str, records: Iterable[Mapping] | None = None) -> Throughputs:
        """The measurements of the store in ``store`` (``records``: its records, if read)."""
        out = cls()
        records = Store(store).records() if records is None else records
        for record in records:
            out._add_run(record)
        path = calibration_path(store)
        for c in read_calibrations(store):
            w = Workload(c.model, c.dataset, c.precision)
            plural = "" if c.threads == 1 else "s"
            threads = f"{c.threads} thread{plural}" if c.threads else "threads not recorded"
            parts = [c.measured[:10], f"batch {c.batch_size}", threads, c.spread()]
            when = ", ".join(filter(None, parts))
            source = f"calibration {path} ({when})"
            found = Measurement(c.images_per_s, source, c.peak_memory_bytes, dense_harness=True)
            if c.array > 1:  # its peak is the whole array's: what must fit on the device
                arrays = f"arrays of {c.array} runs, {c.layout or 'default'} layout"
                found = dataclasses.replace(found, source=f"{source}, {arrays}", array=c.array)
                out.arrays.setdefault((w, c.device), {})[(c.array, c.layout)] = found
            else:
                out.calibrated[(w, c.device)] = found
        return out

    def _add_run(self, record: Mapping) -> None:
        metrics = record.get("metrics") or {}
        rate = metrics.get("images_per_s")
        config = record.get("config") or {}
        if record.get("status") == FINISHED and config and "setup_seconds" in metrics:
            method = (config.get("method") or {}).get("name", "")
            device = device_label(record.get("environment") or {})
            self.oneshot.add(_record_workload(config), device, method, metrics)
        if record.get("status") != FINISHED or not rate or not config:
            return
        if metrics.get("array"):
            # A run trained in an array records the array's rate over its K runs: not the rate
            # of a run alone, which these medians stand for.
            return
        w = _record_workload(config)
        device = device_label(record.get("environment") or {})
        method = (config.get("method") or {}).get("name", "")
        for key in ((w, device, method), (w, device, "")):
            self.runs.setdefault(key, []).append(float(rate))
        peak = metrics.get("peak_memory_bytes")
        if peak:
            self.peaks[(w, device)] = max(int(peak), self.peaks.get((w, device), 0))
        if metrics.get("train_images_per_epoch"):
            self.epoch_images[w] = int(metrics["train_images_per_epoch"])

    def devices(self) -> list[str]:
        """Every device something was measured on."""
        found = {d for _, d, _ in self.runs} | {d for _, d in self.calibrated}
        found |= {d for _, d in self.arrays} | self.oneshot.devices()
        return sorted(found)

    def lookup(
        self, w: Workload, device: str, method: str = "", array: int = 1, layout: str | None = None
    ) -> Measurement | None:
        """The images/s of ``w`` on ``device``: the store's runs (of ``method`` first), else the
        calibration file; None when neither measured it. ``array`` > 1: a run trained in an
        array of up to that many runs in ``layout`` (None: the one the device uses for the
        model unless told), at the rate of the largest calibrated array of that layout that
        fits (the device-hours of K runs are their images over the array's images/s), if any;
        else at a run's own rate (its ``array`` is then 1)."""
        if array > 1:
            from benchmark.training.array.fit import planned_layout

            wanted = layout or planned_layout(device.split()[0], w.model, w.dataset)
            timed = self.arrays.get((w, device), {})
            # A calibration that names no layout (older files) timed the default one.
            fits = [(k, lay) for k, lay in timed if 1 < k <= array]
            fits = [(k, lay) for k, lay in fits if lay == wanted or (not lay and not layout)]
            if fits:
                found = timed[max(fits)]
                return dataclasses.replace(found, images_per_epoch=self.epoch_images.get(w))
        for key in ((w, device, method), (w, device, "")):
            rates = self.runs.get(key)
            if rates:
                who = f"{key[2]} " if key[2] else ""
                return Measurement(
                    statistics.median(rates),
                    f"median of {len(rates)} finished {who}run(s) in the store",
                    self.peaks.get((w, device)),
                    self.epoch_images.get(w),
                )
        found = self.calibrated.get((w, device))
        if found is not None and found.images_per_epoch is None and w in self.epoch_images:
            found = dataclasses.replace(found, images_per_epoch=self.epoch_images[w])
        return found

    def choose_device(self, workloads: Iterable[Workload], asked: str | None) -> str | None:
        """The device to estimate for: the measured device ``asked`` names (``cpu``, ``cuda``, or
        part of a GPU's name), else the one that measured most of ``workloads``; None if no
        device measured any (or none matches ``asked``)."""
        wanted = set(workloads)
        candidates = self.devices()
        if asked:
            candidates = [d for d in candidates if asked.lower() in d.lower()]

        def covered(device: str) -> int:
            found = [
                w
                for w in wanted
                if (w, device) in self.arrays
                or self.lookup(w, device)
                or self.oneshot.measured(w, device)
            ]
            return len(found)

        best = max(candidates, key=lambda d: (covered(d), d.startswith("cuda")), default=None)
        return best if best is not None and (asked or covered(best)) else None


@dataclass
class CostLine:
    """The cost of one group of runs (a table row, a method, the dense parents, the total)."""

    label: str
    runs: int = 0
    missing: int = 0
    passes: int = 0
    missing_passes: int = 0
    # Forward tokens of the runs' one-shot phases (training.forward_tokens), of all and of the
    # missing runs; the runs whose evaluation tokens are not counted (their files absent).
    tokens: int = 0
    missing_tokens: int = 0
    uncounted: set[str] = field(default_factory=set)  # their data sets
    hours: float = 0.0  # device-hours of the missing runs (meaningless while unknown is set)
    all_hours: float = 0.0  # of every run of the group
    unknown: set[Workload] = field(default_factory=set)
    no_size: set[str] = field(default_factory=set)  # datasets of unknown training-set size
    peak_bytes: int | None = None
    # Workloads whose peak memory nothing measured (CPU runs and calibrations record none).
    no_peak: set[Workload] = field(default_factory=set)
    # Methods priced at the dense harness's calibrated rate: the hours are a lower bound.
    at_dense_rate: set[str] = field(default_factory=set)
    # Whether peak_bytes holds an analytic estimate (Method.memory_estimate), not a measurement.
    peak_estimated: bool = False
    # Workloads of runs that train in arrays (--array) priced at a run's own rate: no array
    # of them was calibrated on the device.
    no_array: set[Workload] = field(default_factory=set)
    # Runs with a setup phase (a one-shot prune) that no finished run of theirs has timed, and
    # the methods priced at another method's setup seconds.
    no_setup: set[Workload] = field(default_factory=set)
    setup_from_other: set[str] = field(default_factory=set)
    setup_by_seconds: set[Workload] = field(default_factory=set)  # not priced by tokens

    @property
    def known(self) -> bool:
        """Whether the hours are a measured figure."""
        return not self.unknown and not self.no_size and not self.no_setup

    def add(self, other: CostLine) -> None:
        """Add ``other``'s runs to this line (totals)."""
        self.runs += other.runs
        self.missing += other.missing
        self.passes += other.passes
        self.missing_passes += other.missing_passes
        self.tokens += other.tokens
        self.missing_tokens += other.missing_tokens
        self.uncounted |= other.uncounted
        self.hours += other.hours
        self.all_hours += other.all_hours
        self.unknown |= other.unknown
        self.no_size |= other.no_size
        self.no_peak |= other.no_peak
        self.at_dense_rate |= other.at_dense_rate
        self.no_setup |= other.no_setup
        self.setup_from_other |= other.setup_from_other
        self.setup_by_seconds |= other.setup_by_seconds
        if other.peak_bytes:
            self.peak_bytes = max(self.peak_bytes or 0, other.peak_bytes)
        self.peak_estimated |= other.peak_estimated
        self.no_array |= other.no_array


@dataclass
class Estimate:
    """Per group and in total, what a plan costs on one device."""

    lines: list[CostLine]
    total: CostLine
    device: str | None
    sources: dict[Workload, str]

    def unknown(self) -> set[Workload]:
        """Workloads without a measurement on the device."""
        return set(self.total.unknown)


def estimate(
    groups: Mapping[str, Sequence[tuple[str, RunConfig]]],
    finished: set[str],
    throughputs: Throughputs,
    device: str | None,
    array: int = 1,
    known: Parents | None = None,
    layout: str | None = None,
) -> Estimate:
    """The cost of each group of runs (run id, config) and of their dense parents (one line),
    on ``device``. A run in several groups counts in the first only; every dense parent once.
    ``array`` > 1: runs that can share an array are priced at a calibrated array rate (of
    arrays in ``layout``; None: the device's default); ``known``: the runs' parents where the
    caller keeps them.
    """
    known = Parents() if known is None else known
    seen: set[str] = set()
    parents: dict[str, RunConfig] = {}
    sources: dict[Workload, str] = {}
    mine: dict[str, list[tuple[str, RunConfig]]] = {}
    for label, pairs in groups.items():
        mine[label] = []
        for run_id, cfg in pairs:
            if run_id not in seen:
                seen.add(run_id)
                mine[label].append((run_id, cfg))
            parent = known.of(run_id, cfg)
            if parent is not None:
                parents.setdefault(*parent)
    dense = [(pid, p) for pid, p in parents.items() if pid not in seen]
    everything = [pair for pairs in mine.values() for pair in pairs] + dense
    sizes = array_sizes([cfg for _, cfg in everything], array, layout) if array > 1 else {}
    priced = _Pricing(throughputs, device, sources, sizes, layout)
    lines = [_line(label, pairs, finished, priced) for label, pairs in mine.items()]
    if dense:
        lines.append(_line(DENSE_PARENTS, dense, finished, priced))
    total = CostLine("total")
    for line in lines:
        total.add(line)
    return Estimate(lines, total, device, sources)


def array_sizes(
    cfgs: Sequence[RunConfig], size: int, layout: str | None = None
) -> dict[str, tuple[int, float]]:
    """The array each run of ``cfgs`` trains in with ``--array size`` (by run id; runs left to
    pack are absent): its slots and how full they stay (its runs' passes over its slots times
    the epochs it takes), as benchmark.training.array.fit.form_arrays forms arrays from the
    whole plan: 3 compatible runs are an array of 3 slots, priced at a calibrated array of at
    most 3 runs, not at the largest one. (A job forms arrays from its own runs, so where a job
    splits a group its arrays come out smaller than these.)"""
    from benchmark.training.array.fit import array_span, form_arrays

    arrays, _rest, _why = form_arrays(list(cfgs), size, layout)
    out: dict[str, tuple[int, float]] = {}
    for group in arrays:
        slots, passes = min(size, len(group)), [run_passes(c) for c in group]
        fill = sum(passes) / (slots * array_span(passes, slots))
        out.update({cfg.run_id: (slots, fill) for cfg in group})
    return out


@dataclass
class _Pricing:
    """What prices a run: the measurements, the device, the arrays the runs form."""

    throughputs: Throughputs
    device: str | None
    sources: dict[Workload, str]  # filled in: every source a workload's rates come from
    sizes: Mapping[str, tuple[int, float]]  # run id -> its array's slots and fill
    layout: str | None


def _line(
    label: str, pairs: Sequence[tuple[str, RunConfig]], finished: set[str], priced: _Pricing
) -> CostLine:
    line = CostLine(label, runs=len(pairs))
    device, sources = priced.device, priced.sources
    for run_id, cfg in pairs:
        passes = run_passes(cfg)
        missing = run_id not in finished
        line.passes += passes
        line.missing += missing
        line.missing_passes += passes * missing
        w = workload(cfg)
        if has_setup_phase(cfg):
            _add_setup(line, cfg, w, priced, missing)
            if passes == 0:  # nothing trained: no images/s to look up
                if not _add_memory_estimate(line, cfg):
                    line.no_peak.add(w)
                continue
        k, fill = priced.sizes.get(run_id, (1, 1.0))
        found = None
        if device:
            found = priced.throughputs.lookup(w, device, cfg.method.name, k, priced.layout)
        if k > 1 and (found is None or found.array == 1):
            line.no_array.add(w)
        if found is None:
            line.unknown.add(w)
            if not _add_memory_estimate(line, cfg):
                line.no_peak.add(w)
            continue
        # Every distinct source of a workload's rates (single runs and arrays of some size).
        known_sources = sources.get(w, "")
        if found.source not in known_sources.split("; "):
            sources[w] = f"{known_sources}; {found.source}" if known_sources else found.source
        if found.peak_memory_bytes:
            line.peak_bytes = max(line.peak_bytes or 0, found.peak_memory_bytes)
        elif not _add_memory_estimate(line, cfg):
            line.no_peak.add(w)
        if found.dense_harness and cfg.method.name != "dense":
            line.at_dense_rate.add(cfg.method.name)
        images = found.images_per_epoch or images_per_pass(cfg)
        if images is None:
            line.no_size.add(cfg.data.name)
            continue
        # An array's empty slots cost what full ones do: its runs' hours over its fill.
        hours = passes * images / found.images_per_s / 3600.0 / (fill if found.array > 1 else 1)
        line.all_hours += hours
        line.hours += hours * missing
    return line


def _add_setup(
    line: CostLine, cfg: RunConfig, w: Workload, priced: _Pricing, missing: bool
) -> None:
    """Count a run's one-shot forward tokens and price its setup phase (a one-shot prune) at
    finished runs' tokens/s, else their seconds (:mod:`benchmark.launch.oneshot_cost`)."""
    tokens = oneshot_tokens(cfg)
    if tokens is not None and tokens.total is not None:
        line.tokens += tokens.total
        line.missing_tokens += tokens.total * missing
    else:
        line.uncounted.add(f"{cfg.data.name} (data.root {cfg.data.root!r})")
    device = priced.device
    found = priced.throughputs.oneshot.price(cfg, w, device, tokens) if device else None
    if found is None:
        line.no_setup.add(w)
        return
    if found.other_method:
        line.setup_from_other.add(cfg.method.name)
    if not found.by_tokens:
        line.setup_by_seconds.add(w)
    line.all_hours += found.seconds / 3600.0
    line.hours += found.seconds / 3600.0 * missing


def _record_workload(config: Mapping) -> Workload:
    """The workload of a stored record's config."""
    model, optim = config.get("model") or {}, config.get("optim") or {}
    return Workload(
        model_label(model.get("name", "?"), model.get("pretrained", "")),
        (config.get("data") or {}).get("name", "?"),
        precision_label(
            model.get("dtype", "float32"),
            "bf16" if optim.get("bf16") else "fp16" if optim.get("fp16") else "fp32",
        ),
    )


def _add_memory_estimate(line: CostLine, cfg: RunConfig) -> bool:
    """Where no run measured the peak memory: the analytic estimate of a method that has one
    (a classmethod ``memory_estimate(cfg) -> bytes | None``, e.g. the language-model methods);
    False when the method has none."""
    from methods import get_method

    count = getattr(get_method(cfg.method.name), "memory_estimate", None)
    estimated = count(cfg) if count is not None else None
    if estimated:
        line.peak_bytes = max(line.peak_bytes or 0, estimated)
        line.peak_estimated = True
    return bool(estimated)
