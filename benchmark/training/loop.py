"""The epoch loop of a run, as generators that yield after every training iteration.

:meth:`Trainer.fit <benchmark.training.trainer.Trainer.fit>` drives them to the end for one run;
:mod:`benchmark.training.packing` drives several runs' generators in turn, so that K runs of a
grid share one device inside one process, each step on its own CUDA stream.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from tqdm.auto import tqdm

from benchmark.training.state import DivergenceError

if TYPE_CHECKING:
    from benchmark.training.trainer import Trainer

T = TypeVar("T")

# Iterations at the start of every epoch left out of the images/s figure (allocator warm-up,
# first-touch of caches, cudnn autotuning).
TIMING_WARMUP_ITERS = 2


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


def drive(steps: Generator[None, None, T]) -> T:
    """Run a step generator to its end and return its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def epoch_steps(trainer: Trainer, epoch: int) -> Generator[None, None, dict[str, Any]]:
    """One epoch of training with the method's hooks, yielding after every iteration; returns
    the epoch's train stats."""
    model, method = trainer.model, trainer.method
    in_method = epoch < trainer.method_epochs
    if in_method:
        trainer.method_hook(method.on_epoch_start, epoch)
    # Whatever the epoch-boundary hooks changed, no graph of the last epoch is replayed.
    trainer.runner.invalidate()
    trainer.in_method = in_method
    model.train()
    trainer.forward = trainer.dp.wrap(model)
    trainer.loss_sum.zero_()
    seen = 0
    timed_images = 0
    capture_seconds = 0.0
    warmup_seconds = 0.0
    t0 = None
    batches = trainer.data.train_batches(epoch, trainer.cfg.seed)
    if trainer.ipe >= 200 and trainer.cfg.logging.progress:
        batches = tqdm(batches, total=trainer.ipe, leave=False, desc=f"epoch {epoch + 1}")
    lr = 0.0
    for it, (x, y) in enumerate(batches):
        if it:
            yield  # between two iterations: another run sharing the device may take a turn
        if it == TIMING_WARMUP_ITERS:
            trainer.wait()
            t0 = time.perf_counter()
        step = epoch * trainer.ipe + it
        lr = trainer.lr_at(step, epoch)
        trainer.set_lr(lr)
        if in_method:
            method.on_iteration_start(step)
        trainer.loss_scale = trainer.dp.loss_scale(
            it, x.shape[0], trainer.data.num_train, trainer.data.batch_size
        )
        shape = tuple(x.shape)
        if trainer.first_shape is None:
            trainer.first_shape = shape
        warmup = t0 is not None and is_warmup_batch(
            shape, trainer.first_shape, trainer.trained_shapes
        )
        if warmup:
            trainer.wait()
            begin = time.perf_counter()
        spent = trainer.runner.run(x, y, step)
        trainer.trained_shapes.add(shape)
        seen += x.shape[0]
        if t0 is None:
            continue
        capture_seconds += spent
        if warmup:
            trainer.wait()
            # Capture time (if this iteration captured) is counted once, as capture.
            warmup_seconds += time.perf_counter() - begin - spent
        else:
            timed_images += x.shape[0]
    trainer.wait()
    untimed = capture_seconds + warmup_seconds
    elapsed = time.perf_counter() - t0 - untimed if t0 is not None else 0.0
    loss_sum, seen, timed_images, elapsed = trainer.dp.reduce_epoch(
        trainer.loss_sum, seen, timed_images, elapsed
    )
    if t0 is not None:
        trainer.state.throughput.images += timed_images
        trainer.state.throughput.seconds += elapsed
    trainer.state.throughput.warmup_seconds += warmup_seconds
    # Capture time of this process since the last epoch (a resumed run adds to its own).
    captured = trainer.runner.stats.capture_seconds
    trainer.state.throughput.compile_seconds += captured - trainer.capture_counted
    trainer.capture_counted = captured
    trainer.dp.sync_buffers(model)
    train_loss = float(loss_sum) / max(seen, 1)
    if not math.isfinite(train_loss):
        raise DivergenceError(f"training loss is {train_loss} in epoch {epoch + 1}")
    cycle_ended = trainer.method_hook(method.on_epoch_end, epoch) if in_method else False
    trainer.dp.check_same(trainer.ctx.masks.masks, f"masks after epoch {epoch + 1}")
    return {"epoch": epoch + 1, "lr": lr, "train_loss": train_loss, "cycle_end": cycle_ended}


def fit_steps(
    trainer: Trainer, stop_after: int | None = None
) -> Generator[None, None, dict[str, Any] | None]:
    """Train to the end of the budget (resuming state if restored), yielding after every
    training iteration, and return the metrics.

    ``stop_after`` stops once that many epochs are done (after their checkpoint), as an
    interruption would, and returns None; tests use it to check that resuming is exact.
    """
    start = time.perf_counter()
    wall_before = trainer.state.wall_seconds
    epochs = range(trainer.state.epoch, trainer.total_epochs)
    # The run's own peak, not that of an earlier run of this process; runs packed into one
    # process share the device's counter, so a packed run records none (benchmark.training.packing).
    own_peak = trainer.device.type == "cuda" and not trainer.stream_only
    if own_peak:
        torch.cuda.reset_peak_memory_stats(trainer.device)
    bar = tqdm(
        epochs,
        total=trainer.total_epochs,
        initial=trainer.state.epoch,
        desc=trainer.cfg.run_id,
        disable=not trainer.cfg.logging.progress,
        leave=False,
    )
    for epoch in bar:
        epoch_start = time.perf_counter()
        # The method's hook seconds at the epoch's start, after the final prune and after
        # training: its prunes are timed apart from training and evaluation.
        hooks_start = trainer.method_seconds
        if epoch == trainer.method_epochs and not trainer.state.finalized:
            trainer.finalize()
        finalized = time.perf_counter()
        hooks_finalized = trainer.method_seconds
        before = dataclasses.replace(trainer.state.throughput)
        stats = yield from epoch_steps(trainer, epoch)
        trained = time.perf_counter()
        hooks_trained = trainer.method_seconds
        record = trainer.epoch_record(epoch, stats)
        trainer.state.history.append(record)
        done = trainer.state.throughput
        phases = {
            "train": trained - finalized - (hooks_trained - hooks_finalized),
            "capture": done.compile_seconds - before.compile_seconds,
            "warmup": done.warmup_seconds - before.warmup_seconds,
            "method": hooks_trained - hooks_start,
        }
        # The final prune's pre-fine-tuning evaluation counts as evaluation.
        outside_train = time.perf_counter() - trained + finalized - epoch_start
        phases["evaluate"] = outside_train - (hooks_finalized - hooks_start)
        trainer.state.epoch = epoch + 1
        trainer.state.wall_seconds = wall_before + time.perf_counter() - start
        if "val" in record:
            bar.set_postfix(val=f"{record['val']['top1']:.3f}", loss=f"{stats['train_loss']:.3f}")
        trainer.state.epoch_seconds.append(time.perf_counter() - epoch_start)
        trainer.state.epoch_phases.append(phases)
        saving = time.perf_counter()
        trainer.write_checkpoint()
        phases["checkpoint"] = time.perf_counter() - saving
        trainer.state.epoch_seconds[-1] += phases["checkpoint"]
        if stop_after is not None and trainer.state.epoch >= stop_after:
            return None
    if not trainer.state.finalized:
        trainer.finalize()
    metrics = trainer.final_metrics()
    metrics = trainer.pick_finetune(metrics)
    metrics["images_per_s"] = trainer.state.throughput.images_per_s
    metrics["compile_seconds"] = trainer.state.throughput.compile_seconds
    metrics["warmup_seconds"] = trainer.state.throughput.warmup_seconds
    metrics["epoch_seconds"] = list(trainer.state.epoch_seconds)
    metrics["epoch_phases"] = [dict(p) for p in trainer.state.epoch_phases]
    metrics["wall_seconds"] = wall_before + time.perf_counter() - start
    metrics["step"] = trainer.step_record()
    # What a cost estimate of later runs needs (benchmark.launch.estimate): the images of one
    # epoch and, on a GPU, the device memory this run needed at its peak (this process's part).
    metrics["train_images_per_epoch"] = math.ceil(
        trainer.data.num_train * trainer.cfg.data.epoch_fraction
    )
    if own_peak:
        metrics["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(trainer.device))
    return metrics
