"""The budgeted training loop: method hooks, evaluation, metrics and epoch checkpoints."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from benchmark.config.run import RunConfig, check
from benchmark.core.files import CorruptFileError, load_checkpoint, save_checkpoint
from benchmark.core.precision import half_autocast
from benchmark.data.base import DataSource, build_dataset
from benchmark.measure.metrics import eval_mode, sparsity_stats
from benchmark.models.causal_lm import LM_MODELS
from benchmark.models.registry import build_model
from benchmark.pruning import MaskStore
from benchmark.pruning.offload import Placement
from benchmark.schedules.original import original_warmup_iters
from benchmark.tasks import Task, get_task
from benchmark.training.device import configure_kernels, resolve_device, seed_everything, sync
from benchmark.training.distributed import DataParallel, barrier, rank_device
from benchmark.training.fast_step import (
    DeviceLearningRates,
    GraphBackend,
    StepPlan,
    StepRunner,
    plan_step,
    uses_channels_last,
)
from benchmark.training.forward_tokens import oneshot_tokens
from benchmark.training.loop import EpochLoop, drive
from benchmark.training.placement import lm_metrics, place_model
from benchmark.training.state import (
    CheckpointDiscarded,
    TrainState,
    discard_checkpoint,
    numpy_rng_from_plain,
    numpy_rng_to_plain,
    own_storage,
    train_state_from_plain,
)
from methods import get_method
from methods.base import Method, TrainContext

T = TypeVar("T")


# The parts of an epoch's wall-clock that a result records per epoch: training iterations
# ("capture" and "warmup" are parts of them), the method's epoch-boundary hooks (its prunes,
# with what they measure, and the final prune), evaluation (with the final prune's evaluation
# before fine-tuning) and the checkpoint's write.
EPOCH_PHASES = ("train", "capture", "warmup", "method", "evaluate", "checkpoint")


CHECKPOINT_KEYS = ("run_id", "state", "model", "optimizer", "masks", "method", "record", "rng")


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


def build_optimizer(
    cfg: RunConfig, groups: list[dict[str, Any]], fused: bool
) -> torch.optim.Optimizer:
    """The run's optimizer (``optim.name``) over the method's parameter groups, at lr 0."""
    if cfg.optim.name == "adamw":
        # Language-model retraining (PERP, Wanda's LoRA): AdamW with torch's default betas.
        return torch.optim.AdamW(
            groups, lr=0.0, weight_decay=cfg.optim.weight_decay, fused=True if fused else None
        )
    return torch.optim.SGD(
        groups,
        lr=0.0,
        momentum=cfg.optim.momentum,
        nesterov=cfg.optim.use_nesterov(),
        weight_decay=cfg.optim.weight_decay,
        # One kernel for the whole step, reading the learning rate from a device tensor.
        fused=True if fused else None,
    )


class Trainer(EpochLoop):
    """Runs one configured run from scratch or from its last epoch checkpoint."""

    def __init__(
        self,
        cfg: RunConfig,
        checkpoint_path: Path | None = None,
        parent_state: dict[str, torch.Tensor] | None = None,
        graph_backend: GraphBackend | None = None,
        placement: Placement | None = None,
    ) -> None:
        """``graph_backend`` replaces CUDA graph capture (tests replay steps on the CPU);
        ``placement`` where a language model is kept (tests count what moves; default: as
        ``runtime.offload`` says)."""
        began = time.perf_counter()
        self.cfg = cfg
        self.checkpoint_path = checkpoint_path
        # One process of a data-parallel run, or the whole run (see benchmark.training.distributed).
        # Whole-batch BatchNorm unless the run id says per process (model.batchnorm_processes).
        self.dp = DataParallel.current(cfg.model.batchnorm_processes == 1)
        self.device = rank_device(resolve_device(cfg.runtime.device))
        if cfg.runtime.threads > 0:
            torch.set_num_threads(cfg.runtime.threads)
        configure_kernels(self.device, cfg.runtime.deterministic)
        # A language model's record holds its peak over the whole run, the one-shot prune and
        # the model's loading included (set before anything is on the device).
        self.peak_from_start = self.device.type == "cuda" and cfg.model.name in LM_MODELS
        if self.peak_from_start:
            torch.cuda.reset_peak_memory_stats(self.device)
        seed_everything(cfg.seed)
        self.data: DataSource = build_dataset(cfg.data, self.device)
        self.task: Task = get_task(self.data.task, cfg)
        self.dp.shard(self.data)
        self.model: nn.Module = build_model(
            cfg.model.name,
            self.data.num_classes,
            self.data.input_shape,
            cfg.model.init,
            # A child starts from its parent's weights, which replace any pretrained ones: it
            # neither needs nor reads the file (its parent did).
            cfg.model.pretrained if parent_state is None else "",
            cfg.model.dtype,
        )
        self.placement = place_model(
            cfg, self.model, self.data.num_classes, self.device, self.dp.world, placement
        )
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
        masks = MaskStore(
            self.task.prunable(self.model, cfg.method.exclude),
            getattr(method_cls, "mask_dtype", None),  # bool for the language-model methods
        )
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
        # The seconds before training: loading, and a one-shot method's prune and evaluation.
        self.setup_seconds = time.perf_counter() - began
        self.optimizer = build_optimizer(cfg, self.method.param_groups(), self.plan.tensor_lr)
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
        # The half precision of the forward (None: fp32): optim.bf16 / optim.fp16, or a
        # language model's half model.dtype (mixed precision).
        self.half = self.task.autocast_dtype()
        self._autocast = torch.autocast(
            self.device.type,
            dtype=self.half or torch.bfloat16,
            enabled=self.half is not None,
            cache_enabled=False if self.plan.capture else None,
        )
        self.in_method = True
        self.forward: Any = self.model
        self.loss_scale = 1.0
        self.capture_counted = 0.0
        # Batch shapes this process has trained on, and its first (see is_warmup_batch).
        self.trained_shapes: set[tuple[int, ...]] = set()
        self.first_shape: tuple[int, ...] | None = None
        # Seconds this process spent in the method's epoch-boundary hooks (see method_hook).
        self.method_seconds = 0.0
        # What timing waits for: the whole device, or this run's stream alone when runs share the
        # device inside one process (benchmark.training.packing).
        self.stream_only = False

    def wait(self) -> None:
        """Wait for this run's queued device work, so that wall-clock timings are real."""
        if self.stream_only and self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
        else:
            sync(self.device)

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
        autocast = half_autocast(self.device, self.half)
        with torch.no_grad(), autocast, eval_mode(model, training=True):
            for x, _ in self.data.train_batches(self.method_epochs, self.cfg.seed):
                model(x)
        self.dp.sync_buffers(model)  # data-parallel: every process keeps rank 0's statistics

    def _finetune_lr(self) -> float:
        lrs = self.ctx.original_lrs
        warm = original_warmup_iters(self.cfg.schedule, self.ipe)
        if len(lrs) == 0:
            return 0.0  # a method that trains no epoch (one-shot pruning without retraining)
        return float(np.min(lrs[warm:])) if len(lrs) > warm else float(lrs[-1])

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue exactly from the current epoch boundary."""
        rng = {
            "torch": torch.get_rng_state(),
            "numpy": numpy_rng_to_plain(np.random.get_state()),
            "python": random.getstate(),
        }
        if self.device.type == "cuda":
            # This run's GPU only: a resumed job may see a different number of GPUs.
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        return {
            "run_id": self.cfg.run_id,
            "state": dataclasses.asdict(self.state),
            # An array's runs hold views of the array's tensors: each saves its own.
            "model": own_storage(self.model.state_dict()),
            "optimizer": own_storage(self.optimizer.state_dict()),
            "masks": self.ctx.masks.state_dict(),
            "method": self.method.state_dict(),
            "record": self.ctx.record,
            "rng": rng,
        }

    def restore(self, ckpt: dict[str, Any]) -> None:
        """Load a :meth:`checkpoint_state` snapshot."""
        self.state = train_state_from_plain(ckpt["state"])
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
        np.random.set_state(numpy_rng_from_plain(rng["numpy"]))
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

    def write_checkpoint(self) -> None:
        if self.checkpoint_path is not None:
            if self.dp.rank == 0:
                save_checkpoint(self.checkpoint_state(), self.checkpoint_path)
            barrier()  # no rank goes on (or stops) before the checkpoint is on disk

    # ------------------------------------------------------------------ training
    def lr_at(self, step: int, epoch: int) -> float:
        if epoch >= self.method_epochs:
            return self.finetune_lr
        return self.method.lr(step)

    def set_lr(self, lr: float) -> None:
        if self.device_lrs is not None:
            self.device_lrs.set(lr)
            return
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)

    def _capture_key(self, step: int) -> Any:
        """The graph iteration ``step`` replays (None: eager); see Method.capture_key."""
        if not self.in_method:
            return ("finetune",)
        key = self.method.capture_key(step)
        return None if key is None else ("method", key)

    def _train_step(self, x: torch.Tensor, y: torch.Tensor, step: int) -> None:
        """One iteration: forward, loss, backward, the method's hooks, optimizer step.

        The same code runs eagerly and inside a CUDA graph capture (benchmark.training.fast_step).
        """
        opt, method = self.optimizer, self.method
        in_method = self.in_method
        if in_method:
            method.before_forward(step)
        with self._autocast:
            loss = self.task.loss(self.forward, x, y)
            extra = method.extra_loss(step) if in_method else None
            if extra is not None:
                loss = loss + extra
        opt.zero_grad(set_to_none=True)
        scale = self.loss_scale
        (loss * scale if scale != 1.0 else loss).backward()
        # Of the weights the forward used (before the step), as the paper's code's loss.
        logged = method.logged_loss_extra(step) if in_method else None
        if in_method:
            method.before_step(step)
        if self.cfg.optim.grad_clip > 0:
            nn.utils.clip_grad_norm_(method.clipped_parameters(), self.cfg.optim.grad_clip)
        opt.step()
        if in_method:
            method.after_step(step)
        elif self.ctx.masks is not None:
            self.ctx.masks.apply()
        value = loss.detach() if logged is None else loss.detach() + logged
        self.loss_sum += value * x.shape[0]

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """One epoch of training with the method's hooks; returns the epoch's train stats."""
        return drive(self.epoch_steps(epoch))

    def method_hook(self, hook: Callable[..., T], *args: Any) -> T:
        """Run one of the method's epoch-boundary hooks; its seconds go to the "method" phase."""
        began = time.perf_counter()
        result = hook(*args)
        self.wait()  # the kernels of a prune are its own time, not the next phase's
        self.method_seconds += time.perf_counter() - began
        return result

    def epoch_record(self, epoch: int, stats: dict[str, Any]) -> dict[str, Any]:
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

    def finalize(self) -> None:
        """The method's final hard prune, then freeze the zero pattern for fine-tuning."""
        self.method_hook(self.method.finalize)
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
        return drive(self.fit_steps(stop_after))

    def step_record(self) -> dict[str, Any]:
        """How this process ran its training iterations (captured or eager, and why)."""
        stats = self.runner.stats
        return {
            **self.runner.plan.as_record(),
            "captures": stats.captures,
            "replays": stats.replays,
            "eager_iterations": stats.eager,
        }

    def pick_finetune(self, after: dict[str, Any]) -> dict[str, Any]:
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
        metrics = {
            "test": test,
            "val": val,
            "train_loss": last_loss,
            **sparsity_stats(self.model, self.ctx.prunable),
            **self.task.speedup(self.model, self.data),
            **{k: v for k, v in self.ctx.record.items()},
        }
        if self.cfg.eval.zero_shot:  # language models: lm-eval's tasks on the final model
            from benchmark.tasks.zero_shot import evaluate_zero_shot

            metrics["zero_shot"] = evaluate_zero_shot(self.model, self.data.encode, self.cfg)
        return metrics

    def run_extras(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """A language-model run's extra metrics (:func:`lm_metrics`), its forward tokens."""
        if self.cfg.model.name not in LM_MODELS:
            return {}
        windows = self.ipe * self.data.batch_size
        tokens_per_s = metrics.get("images_per_s", 0.0) * self.cfg.data.max_length
        extras = lm_metrics(self.setup_seconds, self.placement, windows, tokens_per_s)
        counted = oneshot_tokens(self.cfg, {"test": self.data.num_test, "val": self.data.num_val})
        return extras | ({"forward_tokens": counted.as_dict()} if counted else {})

    def final_weights(self) -> dict[str, torch.Tensor]:
        """The trained model's state dict on the CPU: copies of device tensors, and of CPU
        tensors that are views into a larger storage; a CPU tensor of its own is handed over as
        it is (the run is over: an offloaded 70B model is not copied in host memory again)."""
        return {
            k: own_storage(v.detach()) if v.device.type == "cpu" else v.detach().cpu()
            for k, v in self.model.state_dict().items()
        }
