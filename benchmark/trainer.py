"""The budgeted training loop: method hooks, evaluation, metrics and epoch checkpoints."""

from __future__ import annotations

import dataclasses
import math
import os
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from benchmark.checkpoint import CorruptFileError, load_checkpoint, move_aside, save_checkpoint
from benchmark.config import RunConfig, check
from benchmark.data import DataSource, build_dataset
from benchmark.distributed import DataParallel, barrier, is_main, rank_device
from benchmark.fast_step import (
    DeviceLearningRates,
    GraphBackend,
    StepPlan,
    StepRunner,
    plan_step,
    uses_channels_last,
)
from benchmark.metrics import eval_mode, sparsity_stats
from benchmark.models import build_model
from benchmark.pruning import MaskStore
from benchmark.schedules import original_warmup_iters
from benchmark.store import StoreWarning
from benchmark.tasks import Task, get_task
from methods import get_method
from methods.base import Method, TrainContext

T = TypeVar("T")

# Iterations at the start of every epoch left out of the images/s figure (allocator warm-up,
# first-touch of caches, cudnn autotuning).
TIMING_WARMUP_ITERS = 2
# The parts of an epoch's wall-clock that a result records per epoch: training iterations
# ("capture" and "warmup" are parts of them), the method's epoch-boundary hooks (its prunes,
# with what they measure, and the final prune), evaluation (with the final prune's evaluation
# before fine-tuning) and the checkpoint's write.
EPOCH_PHASES = ("train", "capture", "warmup", "method", "evaluate", "checkpoint")


CHECKPOINT_KEYS = ("run_id", "state", "model", "optimizer", "masks", "method", "record", "rng")


class CheckpointDiscarded(RuntimeError):
    """A damaged checkpoint was moved aside after restoring began; start a fresh Trainer."""


def discard_checkpoint(err: CorruptFileError) -> None:
    """Move a damaged checkpoint aside and warn, naming it: the run restarts from scratch."""
    if not is_main():  # data-parallel: rank 0 moves it; every rank restarts from scratch
        return
    moved = move_aside(err.path)
    warnings.warn(
        f"checkpoint {err.path} is damaged ({err.reason}); moved to {moved.name}, "
        "the run restarts from scratch",
        StoreWarning,
        stacklevel=3,
    )


class DivergenceError(RuntimeError):
    """The training loss became NaN or infinite."""


def resolve_device(name: str) -> torch.device:
    """The torch device for ``runtime.device`` ('auto' picks CUDA when available)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def configure_kernels(device: torch.device, deterministic: bool) -> None:
    """Pick reproducible GPU kernels, or the fastest ones (cuDNN autotuning) when not required."""
    # Always set: a CPU run after a deterministic GPU run in one process must not inherit it.
    torch.use_deterministic_algorithms(deterministic and device.type == "cuda")
    if device.type != "cuda":
        return
    if deterministic:
        # cuBLAS needs a fixed workspace to be deterministic; read at its first use.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic


def is_warmup_batch(
    shape: tuple[int, ...], first: tuple[int, ...] | None, seen: set[tuple[int, ...]]
) -> bool:
    """Whether a batch of ``shape`` warms up kernels rather than measuring training.

    That is a batch of a size the process has not trained on, shaped otherwise like its first
    batch (``first``): an epoch's short last batch, the first time, where cuDNN autotunes every
    convolution anew. Batches whose other dimensions vary (per-batch padded sequences) are
    training like any other: their shapes keep changing, and no GPU kernel autotunes for them.
    """
    return first is not None and shape[1:] == first[1:] and shape not in seen


def sync(device: torch.device) -> None:
    """Wait for queued work on ``device`` (a no-op on CPU), so wall-clock timings are real."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Throughput:
    """Training images and seconds, timed with device synchronisation, warm-up excluded."""

    images: int = 0
    seconds: float = 0.0
    # Seconds spent capturing CUDA graphs: part of the wall-clock, never of ``seconds``.
    compile_seconds: float = 0.0
    # Seconds of iterations on a batch size new to the process (cuDNN autotunes its kernels
    # there: on a GPU the short last batch of the first epoch pays seconds for it). Part of
    # the wall-clock, never of ``seconds``; their images are not counted either.
    warmup_seconds: float = 0.0

    @property
    def images_per_s(self) -> float:
        """Images per second over the timed iterations (0 when nothing was timed)."""
        return self.images / self.seconds if self.seconds > 0 else 0.0


@dataclass
class TrainState:
    """Everything about progress that an epoch checkpoint must restore."""

    epoch: int = 0  # the next epoch to run
    history: list[dict[str, Any]] = field(default_factory=list)
    throughput: Throughput = field(default_factory=Throughput)
    wall_seconds: float = 0.0
    finalized: bool = False
    pre_finetune: dict[str, Any] | None = None
    # Wall-clock of every epoch (training, evaluation, checkpoint): the first one also pays
    # one-time costs (cuDNN autotuning, the first captures), so projections can set it apart.
    # An epoch's checkpoint holds its time before that checkpoint's own write.
    epoch_seconds: list[float] = field(default_factory=list)
    # Where each epoch's wall-clock went (EPOCH_PHASES; "capture" and "warmup" are part of
    # "train"; "method" is the method's epoch-boundary hooks: its prunes and what they
    # measure); an epoch written by a checkpoint lacks only its own "checkpoint" entry.
    epoch_phases: list[dict[str, float]] = field(default_factory=list)


def _train_state_from_plain(data: dict[str, Any]) -> TrainState:
    """The TrainState saved as a plain dict (checkpoints hold no pickled classes)."""
    data = dict(data)
    data["throughput"] = Throughput(**data["throughput"])
    return TrainState(**data)


def _numpy_rng_to_plain(state: tuple[Any, ...]) -> list[Any]:
    """NumPy's legacy RNG state with its key array as a tensor (loadable with weights_only)."""
    name, keys, pos, has_gauss, cached = state
    return [name, torch.from_numpy(np.asarray(keys, dtype=np.int64)), pos, has_gauss, cached]


def _numpy_rng_from_plain(state: list[Any]) -> tuple[Any, ...]:
    """The inverse of :func:`_numpy_rng_to_plain`."""
    name, keys, pos, has_gauss, cached = state
    return (name, keys.cpu().numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached))


def check_prunable_set(cfg: RunConfig, num_prunable: int) -> None:
    """Refuse a run whose prunable set is empty or whose goal sparsity would prune all of it."""
    exclude = cfg.method.exclude
    check(
        num_prunable > 0,
        "method.exclude",
        exclude,
        f"patterns that leave at least one conv/linear weight of model {cfg.model.name!r} "
        "to prune (these exclude every one)",
    )
    if get_method(cfg.method.name).info.sparsity_specifiable:
        s = cfg.method.sparsity
        check(
            round(s * num_prunable) < num_prunable,
            "method.sparsity",
            s,
            f"a sparsity that keeps at least one of the {num_prunable} prunable weights",
        )


class Trainer:
    """Runs one configured run from scratch or from its last epoch checkpoint."""

    def __init__(
        self,
        cfg: RunConfig,
        checkpoint_path: Path | None = None,
        parent_state: dict[str, torch.Tensor] | None = None,
        graph_backend: GraphBackend | None = None,
    ) -> None:
        """``graph_backend`` replaces CUDA graph capture (tests replay steps on the CPU)."""
        self.cfg = cfg
        self.checkpoint_path = checkpoint_path
        # One process of a data-parallel run, or the whole run (see benchmark.distributed).
        self.dp = DataParallel.current(cfg.runtime.sync_bn)
        self.device = rank_device(resolve_device(cfg.runtime.device))
        if cfg.runtime.threads > 0:
            torch.set_num_threads(cfg.runtime.threads)
        configure_kernels(self.device, cfg.runtime.deterministic)
        seed_everything(cfg.seed)
        self.data: DataSource = build_dataset(cfg.data, self.device)
        self.task: Task = get_task(self.data.task, cfg)
        self.dp.shard(self.data)
        self.model: nn.Module = build_model(
            cfg.model.name,
            self.data.num_classes,
            self.data.input_shape,
            cfg.model.init,
            cfg.model.pretrained,
        ).to(self.device)
        channels_last = uses_channels_last(cfg.runtime.channels_last, self.device.type, self.model)
        if channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.model = self.dp.prepare_model(self.model, self.device)
        method_cls = get_method(cfg.method.name)
        self.plan: StepPlan = plan_step(
            cfg.runtime.cuda_graphs,
            self.device.type,
            self.dp.world,
            method_cls,
            channels_last,
            cfg.run_id,
            backend_given=graph_backend is not None,
        )
        self.method: Method = method_cls(cfg)
        self.method_epochs = self.method.total_epochs()
        self.total_epochs = self.method_epochs + cfg.finetune.epochs
        self.ipe = self.data.iters_per_epoch()
        masks = MaskStore(self.task.prunable(self.model, cfg.method.exclude))
        check_prunable_set(cfg, masks.num_prunable())
        self.ctx = TrainContext(
            cfg=cfg,
            model=self.model,
            data=self.data,
            device=self.device,
            masks=masks,
            iters_per_epoch=self.ipe,
            evaluate=self.evaluate,
            original_lrs=self.method.schedule_lrs(self.ipe),
            recompute_batchnorm=self.recompute_batchnorm,
            captured_steps=self.plan.capture,
        )
        self.method.setup(self.ctx, parent_state)
        self.optimizer = torch.optim.SGD(
            self.method.param_groups(),
            lr=0.0,
            momentum=cfg.optim.momentum,
            nesterov=cfg.optim.use_nesterov(),
            weight_decay=cfg.optim.weight_decay,
            # One kernel for the whole step, reading the learning rate from a device tensor.
            fused=True if self.plan.tensor_lr else None,
        )
        self.ctx.optimizer = self.optimizer
        self.device_lrs = (
            DeviceLearningRates(self.optimizer, self.device) if self.plan.tensor_lr else None
        )
        self.state = TrainState()
        self.finetune_lr = self._finetune_lr()
        # The epoch's summed training loss, on the device (one tensor a captured step adds to).
        self.loss_sum = torch.zeros((), device=self.device)
        self.runner = StepRunner(
            self.plan,
            self._train_step,
            self._capture_key,
            self.optimizer,
            self.device,
            backend=graph_backend,
            run_id=cfg.run_id,
        )
        # No autocast weight cache on the fast path: a cached cast would outlive its graph.
        self._autocast = torch.autocast(
            self.device.type,
            dtype=torch.bfloat16,
            enabled=cfg.optim.bf16,
            cache_enabled=False if self.plan.capture else None,
        )
        self._in_method = True
        self._forward: Any = self.model
        self._loss_scale = 1.0
        self._capture_counted = 0.0
        # Batch shapes this process has trained on, and its first (see is_warmup_batch).
        self._trained_shapes: set[tuple[int, ...]] = set()
        self._first_shape: tuple[int, ...] | None = None
        # Seconds this process spent in the method's epoch-boundary hooks (see _method_hook).
        self._method_seconds = 0.0

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, split: str) -> dict[str, float]:
        """The task's metrics (accuracy, loss, ...) of the current model on ``split``."""
        result = self.task.evaluate(self.model, self.data, split)
        # Data-parallel: each process evaluated its part of the split; combine them.
        return self.dp.combine_eval(result, self.data.eval_range(split), self.device)

    def recompute_batchnorm(self) -> None:
        """Refresh BatchNorm running statistics: one epoch of training batches in train mode.

        No gradients and no optimizer step; the batches are those of the epoch after the
        method's training (a fixed, seeded order), and every module's mode is restored.
        """
        model = self.model
        if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            return
        autocast = torch.autocast(
            self.device.type, dtype=torch.bfloat16, enabled=self.cfg.optim.bf16
        )
        with torch.no_grad(), autocast, eval_mode(model, training=True):
            for x, _ in self.data.train_batches(self.method_epochs, self.cfg.seed):
                model(x)
        self.dp.sync_buffers(model)  # data-parallel: every process keeps rank 0's statistics

    def _finetune_lr(self) -> float:
        lrs = self.ctx.original_lrs
        warm = original_warmup_iters(self.cfg.schedule, self.ipe)
        return float(np.min(lrs[warm:])) if len(lrs) > warm else float(lrs[-1])

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue exactly from the current epoch boundary."""
        rng = {
            "torch": torch.get_rng_state(),
            "numpy": _numpy_rng_to_plain(np.random.get_state()),
            "python": random.getstate(),
        }
        if self.device.type == "cuda":
            # This run's GPU only: a resumed job may see a different number of GPUs.
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        return {
            "run_id": self.cfg.run_id,
            "state": dataclasses.asdict(self.state),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "masks": self.ctx.masks.state_dict(),
            "method": self.method.state_dict(),
            "record": self.ctx.record,
            "rng": rng,
        }

    def restore(self, ckpt: dict[str, Any]) -> None:
        """Load a :meth:`checkpoint_state` snapshot."""
        self.state = _train_state_from_plain(ckpt["state"])
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        # A checkpoint also holds its groups' step kernel (fused or not): this run's plan decides.
        for group in self.optimizer.param_groups:
            for key in ("fused", "foreach"):
                group[key] = self.optimizer.defaults.get(key)
        if self.device_lrs is not None:
            self.device_lrs.install()  # a checkpoint holds its own learning-rate values
        self.ctx.masks.load_state_dict(ckpt["masks"], model=self.model)
        self.method.load_state_dict(ckpt["method"])
        self.ctx.record.clear()
        self.ctx.record.update(ckpt["record"])
        rng = ckpt["rng"]
        # The checkpoint is loaded onto the run's device; RNG states must come back as CPU bytes.
        torch.set_rng_state(rng["torch"].cpu())
        np.random.set_state(_numpy_rng_from_plain(rng["numpy"]))
        random.setstate(rng["python"])
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"].cpu(), self.device)

    def try_resume(self) -> bool:
        """Restore the last checkpoint of this run id if one exists; True when resumed."""
        if self.checkpoint_path is None or not self.checkpoint_path.exists():
            return False
        path = self.checkpoint_path
        try:
            ckpt = load_checkpoint(path, self.device)
            missing = [key for key in CHECKPOINT_KEYS if key not in ckpt]
            if missing:
                raise CorruptFileError(path, f"lacks {', '.join(missing)}")
        except CorruptFileError as err:
            discard_checkpoint(err)
            return False
        if ckpt.get("run_id") != self.cfg.run_id:
            return False
        try:
            self.restore(ckpt)
        except Exception as err:
            # Part of the state may be restored already: this trainer must not go on.
            discard_checkpoint(CorruptFileError(path, f"does not fit this run ({err})"))
            raise CheckpointDiscarded(str(path)) from err
        return True

    def _save(self) -> None:
        if self.checkpoint_path is not None:
            if self.dp.rank == 0:
                save_checkpoint(self.checkpoint_state(), self.checkpoint_path)
            barrier()  # no rank goes on (or stops) before the checkpoint is on disk

    # ------------------------------------------------------------------ training
    def _lr(self, step: int, epoch: int) -> float:
        if epoch >= self.method_epochs:
            return self.finetune_lr
        return self.method.lr(step)

    def _set_lr(self, lr: float) -> None:
        if self.device_lrs is not None:
            self.device_lrs.set(lr)
            return
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)

    def _capture_key(self, step: int) -> Any:
        """The graph iteration ``step`` replays (None: eager); see Method.capture_key."""
        if not self._in_method:
            return ("finetune",)
        key = self.method.capture_key(step)
        return None if key is None else ("method", key)

    def _train_step(self, x: torch.Tensor, y: torch.Tensor, step: int) -> None:
        """One iteration: forward, loss, backward, the method's hooks, optimizer step.

        The same code runs eagerly and inside a CUDA graph capture (benchmark.fast_step).
        """
        model, opt, method = self.model, self.optimizer, self.method
        in_method = self._in_method
        if in_method:
            method.before_forward(step)
        with self._autocast:
            loss = self.task.loss(self._forward, x, y)
            extra = method.extra_loss(step) if in_method else None
            if extra is not None:
                loss = loss + extra
        opt.zero_grad(set_to_none=True)
        scale = self._loss_scale
        (loss * scale if scale != 1.0 else loss).backward()
        if in_method:
            method.before_step(step)
        if self.cfg.optim.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), self.cfg.optim.grad_clip)
        opt.step()
        if in_method:
            method.after_step(step)
        elif self.ctx.masks is not None:
            self.ctx.masks.apply()
        self.loss_sum += loss.detach() * x.shape[0]

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """One epoch of training with the method's hooks; returns the epoch's train stats."""
        model, method, device = self.model, self.method, self.device
        in_method = epoch < self.method_epochs
        if in_method:
            self._method_hook(method.on_epoch_start, epoch)
        # Whatever the epoch-boundary hooks changed, no graph of the last epoch is replayed.
        self.runner.invalidate()
        self._in_method = in_method
        model.train()
        self._forward = self.dp.wrap(model)
        self.loss_sum.zero_()
        seen = 0
        timed_images = 0
        capture_seconds = 0.0
        warmup_seconds = 0.0
        t0 = None
        batches = self.data.train_batches(epoch, self.cfg.seed)
        if self.ipe >= 200 and self.cfg.logging.progress:
            batches = tqdm(batches, total=self.ipe, leave=False, desc=f"epoch {epoch + 1}")
        lr = 0.0
        for it, (x, y) in enumerate(batches):
            if it == TIMING_WARMUP_ITERS:
                sync(device)
                t0 = time.perf_counter()
            step = epoch * self.ipe + it
            lr = self._lr(step, epoch)
            self._set_lr(lr)
            if in_method:
                method.on_iteration_start(step)
            self._loss_scale = self.dp.loss_scale(
                it, x.shape[0], self.data.num_train, self.data.batch_size
            )
            shape = tuple(x.shape)
            if self._first_shape is None:
                self._first_shape = shape
            warmup = t0 is not None and is_warmup_batch(
                shape, self._first_shape, self._trained_shapes
            )
            if warmup:
                sync(device)
                begin = time.perf_counter()
            spent = self.runner.run(x, y, step)
            self._trained_shapes.add(shape)
            seen += x.shape[0]
            if t0 is None:
                continue
            capture_seconds += spent
            if warmup:
                sync(device)
                # Capture time (if this iteration captured) is counted once, as capture.
                warmup_seconds += time.perf_counter() - begin - spent
            else:
                timed_images += x.shape[0]
        sync(device)
        untimed = capture_seconds + warmup_seconds
        elapsed = time.perf_counter() - t0 - untimed if t0 is not None else 0.0
        loss_sum, seen, timed_images, elapsed = self.dp.reduce_epoch(
            self.loss_sum, seen, timed_images, elapsed
        )
        if t0 is not None:
            self.state.throughput.images += timed_images
            self.state.throughput.seconds += elapsed
        self.state.throughput.warmup_seconds += warmup_seconds
        # Capture time of this process since the last epoch (a resumed run adds to its own).
        captured = self.runner.stats.capture_seconds
        self.state.throughput.compile_seconds += captured - self._capture_counted
        self._capture_counted = captured
        self.dp.sync_buffers(model)
        train_loss = float(loss_sum) / max(seen, 1)
        if not math.isfinite(train_loss):
            raise DivergenceError(f"training loss is {train_loss} in epoch {epoch + 1}")
        cycle_ended = self._method_hook(method.on_epoch_end, epoch) if in_method else False
        self.dp.check_same(self.ctx.masks.masks, f"masks after epoch {epoch + 1}")
        return {"epoch": epoch + 1, "lr": lr, "train_loss": train_loss, "cycle_end": cycle_ended}

    def _method_hook(self, hook: Callable[..., T], *args: Any) -> T:
        """Run one of the method's epoch-boundary hooks; its seconds go to the "method" phase."""
        began = time.perf_counter()
        result = hook(*args)
        sync(self.device)  # the kernels of a prune are its own time, not the next phase's
        self._method_seconds += time.perf_counter() - began
        return result

    def _epoch_record(self, epoch: int, stats: dict[str, Any]) -> dict[str, Any]:
        record = dict(stats)
        last = epoch + 1 == self.total_epochs
        if (epoch + 1) % self.cfg.eval.val_every == 0 or last:
            record["val"] = self.evaluate("val")
        if stats["cycle_end"]:
            record["test"] = self.evaluate("test")
        in_method = epoch < self.method_epochs and not self.state.finalized
        record["sparsity"] = (
            self.method.current_sparsity() if in_method else self.ctx.masks.sparsity()
        )
        return record

    def _finalize(self) -> None:
        """The method's final hard prune, then freeze the zero pattern for fine-tuning."""
        self._method_hook(self.method.finalize)
        self.dp.check_same(self.ctx.masks.masks, "final masks")
        self.state.finalized = True
        if self.cfg.finetune.epochs > 0:
            self.state.pre_finetune = self.final_metrics()
            # FT retrains the final sparse model: its zeros must stay zeros.
            zero_masks = [(p.detach() != 0).to(p.dtype) for p in self.ctx.masks.params]
            self.ctx.masks.update(zero_masks, self.optimizer)

    def fit(self, stop_after: int | None = None) -> dict[str, Any] | None:
        """Train to the end of the budget (resuming state if restored) and return the metrics.

        ``stop_after`` stops once that many epochs are done (after their checkpoint), as an
        interruption would, and returns None; tests use it to check that resuming is exact.
        """
        start = time.perf_counter()
        wall_before = self.state.wall_seconds
        epochs = range(self.state.epoch, self.total_epochs)
        bar = tqdm(
            epochs,
            total=self.total_epochs,
            initial=self.state.epoch,
            desc=self.cfg.run_id,
            disable=not self.cfg.logging.progress,
            leave=False,
        )
        for epoch in bar:
            epoch_start = time.perf_counter()
            # The method's hook seconds at the epoch's start, after the final prune and after
            # training: its prunes are timed apart from training and evaluation.
            hooks_start = self._method_seconds
            if epoch == self.method_epochs and not self.state.finalized:
                self._finalize()
            finalized = time.perf_counter()
            hooks_finalized = self._method_seconds
            before = dataclasses.replace(self.state.throughput)
            stats = self.train_epoch(epoch)
            trained = time.perf_counter()
            hooks_trained = self._method_seconds
            record = self._epoch_record(epoch, stats)
            self.state.history.append(record)
            done = self.state.throughput
            phases = {
                "train": trained - finalized - (hooks_trained - hooks_finalized),
                "capture": done.compile_seconds - before.compile_seconds,
                "warmup": done.warmup_seconds - before.warmup_seconds,
                "method": hooks_trained - hooks_start,
            }
            # The final prune's pre-fine-tuning evaluation counts as evaluation.
            outside_train = time.perf_counter() - trained + finalized - epoch_start
            phases["evaluate"] = outside_train - (hooks_finalized - hooks_start)
            self.state.epoch = epoch + 1
            self.state.wall_seconds = wall_before + time.perf_counter() - start
            if "val" in record:
                bar.set_postfix(
                    val=f"{record['val']['top1']:.3f}", loss=f"{stats['train_loss']:.3f}"
                )
            self.state.epoch_seconds.append(time.perf_counter() - epoch_start)
            self.state.epoch_phases.append(phases)
            saving = time.perf_counter()
            self._save()
            phases["checkpoint"] = time.perf_counter() - saving
            self.state.epoch_seconds[-1] += phases["checkpoint"]
            if stop_after is not None and self.state.epoch >= stop_after:
                return None
        if not self.state.finalized:
            self._finalize()
        metrics = self.final_metrics()
        metrics = self._pick_finetune(metrics)
        metrics["images_per_s"] = self.state.throughput.images_per_s
        metrics["compile_seconds"] = self.state.throughput.compile_seconds
        metrics["warmup_seconds"] = self.state.throughput.warmup_seconds
        metrics["epoch_seconds"] = list(self.state.epoch_seconds)
        metrics["epoch_phases"] = [dict(p) for p in self.state.epoch_phases]
        metrics["wall_seconds"] = wall_before + time.perf_counter() - start
        metrics["step"] = self.step_record()
        return metrics

    def step_record(self) -> dict[str, Any]:
        """How this process ran its training iterations (captured or eager, and why)."""
        stats = self.runner.stats
        return {
            **self.runner.plan.as_record(),
            "captures": stats.captures,
            "replays": stats.replays,
            "eager_iterations": stats.eager,
        }

    def _pick_finetune(self, after: dict[str, Any]) -> dict[str, Any]:
        """With post-training FT, keep the better (by the task's validation metric) of the two."""
        before = self.state.pre_finetune
        if before is None:
            return after
        key = self.task.metric
        use_after = after["val"][key] >= before["val"][key]
        chosen = dict(after if use_after else before)
        chosen["finetune"] = {
            "epochs": self.cfg.finetune.epochs,
            "used": use_after,
            "test_before": before["test"],
            "test_after": after["test"],
        }
        return chosen

    def final_metrics(self) -> dict[str, Any]:
        """Test/validation accuracy, sparsity, theoretical speedup and method records."""
        test = self.evaluate("test")
        val = self.evaluate("val")
        last_loss = self.state.history[-1]["train_loss"] if self.state.history else float("nan")
        return {
            "test": test,
            "val": val,
            "train_loss": last_loss,
            **sparsity_stats(self.model, self.ctx.prunable),
            **self.task.speedup(self.model, self.data),
            **{k: v for k, v in self.ctx.record.items()},
        }

    def final_weights(self) -> dict[str, torch.Tensor]:
        """The trained model's state dict on the CPU."""
        return {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
