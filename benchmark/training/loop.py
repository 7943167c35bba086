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
from typing import Any, TypeVar

import torch
from tqdm.auto import tqdm

from benchmark.training.state import DivergenceError

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


class EpochLoop:
    """The epoch loop of :class:`~benchmark.training.trainer.Trainer`, as generators that yield
    after every training iteration (a base class of the trainer: it reads the trainer's model,
    method, data, state and step runner, and calls its hooks)."""

    def epoch_steps(self, epoch: int) -> Generator[None, None, dict[str, Any]]:
        """One epoch of training with the method's hooks, yielding after every iteration; returns
        the epoch's train stats."""
        model, method = self.model, self.method
        in_method = epoch < self.method_epochs
        if in_method:
            self.method_hook(method.on_epoch_start, epoch)
        # Whatever the epoch-boundary hooks changed, no graph of the last epoch is replayed.
        self.runner.invalidate()
        self.in_method = in_method
        model.train()
        self.forward = self.dp.wrap(model)
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
            if it:
                yield  # between two iterations: another run sharing the device may take a turn
            if it == TIMING_WARMUP_ITERS:
                self.wait()
                t0 = time.perf_counter()
            step = epoch * self.ipe + it
            lr = self.lr_at(step, epoch)
            self.set_lr(lr)
            if in_method:
                method.on_iteration_start(step)
            self.loss_scale = self.dp.loss_scale(
                it, x.shape[0], self.data.num_train, self.data.batch_size
            )
            shape = tuple(x.shape)
            if self.first_shape is None:
                self.first_shape = shape
            warmup = t0 is not None and is_warmup_batch(
                shape, self.first_shape, self.trained_shapes
            )
            if warmup:
                self.wait()
                begin = time.perf_counter()
            spent = self.runner.run(x, y, step)
            self.trained_shapes.add(shape)
            seen += x.shape[0]
            if t0 is None:
                continue
            capture_seconds += spent
            if warmup:
                self.wait()
                # Capture time (if this iteration captured) is counted once, as capture.
                warmup_seconds += time.perf_counter() - begin - spent
            else:
                timed_images += x.shape[0]
        # Once more after the last iteration: the runs of an array (benchmark.training.array)
        # hand in their last batches before any of them ends the epoch.
        yield
        self.wait()
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
        self.state.throughput.compile_seconds += captured - self.capture_counted
        self.capture_counted = captured
        self.dp.sync_buffers(model)
        train_loss = float(loss_sum) / max(seen, 1)
        if not math.isfinite(train_loss):
            raise DivergenceError(f"training loss is {train_loss} in epoch {epoch + 1}")
        cycle_ended = self.method_hook(method.on_epoch_end, epoch) if in_method else False
        self.dp.check_same(self.ctx.masks.masks, f"masks after epoch {epoch + 1}")
        return {"epoch": epoch + 1, "lr": lr, "train_loss": train_loss, "cycle_end": cycle_ended}

    def fit_steps(
        self, stop_after: int | None = None
    ) -> Generator[None, None, dict[str, Any] | None]:
        """Train to the end of the budget (resuming state if restored), yielding after every
        training iteration, and return the metrics.

        ``stop_after`` stops once that many epochs are done (after their checkpoint), as an
        interruption would, and returns None; tests use it to check that resuming is exact.
        """
        start = time.perf_counter()
        wall_before = self.state.wall_seconds
        epochs = range(self.state.epoch, self.total_epochs)
        # The run's own peak, not that of an earlier run of this process; runs packed into one
        # process share the device's counter, so a packed run records none
        # (benchmark.training.packing).
        own_peak = self.device.type == "cuda" and not self.stream_only
        if own_peak and not self.peak_from_start:
            torch.cuda.reset_peak_memory_stats(self.device)
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
            hooks_start = self.method_seconds
            if epoch == self.method_epochs and not self.state.finalized:
                self.finalize()
            finalized = time.perf_counter()
            hooks_finalized = self.method_seconds
            before = dataclasses.replace(self.state.throughput)
            stats = yield from self.epoch_steps(epoch)
            trained = time.perf_counter()
            hooks_trained = self.method_seconds
            record = self.epoch_record(epoch, stats)
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
                val, loss = record["val"]["top1"], stats["train_loss"]
                bar.set_postfix(val=f"{val:.3f}", loss=f"{loss:.3f}")
            self.state.epoch_seconds.append(time.perf_counter() - epoch_start)
            self.state.epoch_phases.append(phases)
            saving = time.perf_counter()
            self.write_checkpoint()
            phases["checkpoint"] = time.perf_counter() - saving
            self.state.epoch_seconds[-1] += phases["checkpoint"]
            if stop_after is not None and self.state.epoch >= stop_after:
                return None
        if not self.state.finalized:
            self.finalize()
        metrics = self.final_metrics()
        metrics = self.pick_finetune(metrics)
        metrics["images_per_s"] = self.state.throughput.images_per_s
        metrics["compile_seconds"] = self.state.throughput.compile_seconds
        metrics["warmup_seconds"] = self.state.throughput.warmup_seconds
        metrics["epoch_seconds"] = list(self.state.epoch_seconds)
        metrics["epoch_phases"] = [dict(p) for p in self.state.epoch_phases]
        metrics["wall_seconds"] = wall_before + time.perf_counter() - start
        metrics["step"] = self.step_record()
        if self.state.array is not None:
            # Kept in the checkpoints: a run resumed alone still says the array it trained in.
            metrics["array"] = dict(self.state.array)
        # What a cost estimate of later runs needs (benchmark.launch.estimate): the images of one
        # epoch and, on a GPU, the device memory this run needed at its peak (this process's part).
        metrics["train_images_per_epoch"] = math.ceil(
            self.data.num_train * self.cfg.data.epoch_fraction
        )
        if own_peak:
            metrics["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(self.device))
        metrics.update(self.run_extras(metrics))
        return metrics
