"""The training step on CUDA replayed as captured CUDA graphs, so images/s measures the method.

At batch 128 a ResNet-56 step is ~170 small kernels: a GPU runs them faster than Python issues
them, so an eager step is launch-bound. Here the steady-state iteration (forward, loss, backward,
the method's per-iteration hooks, mask multiply, optimizer step) is captured once per epoch and
per :meth:`~methods.base.Method.capture_key`, then replayed with one launch per iteration.

What makes this safe for every method:

- Everything that runs between replays is eager: the learning rate (one float32 device tensor
  per optimizer group, filled before every iteration, read by a fused SGD step), the method's
  :meth:`~methods.base.Method.on_iteration_start`, and the epoch-boundary hooks.
- Graphs are dropped at every epoch boundary and after every eager iteration (an event that may
  have replaced tensors a graph reads), and never captured before the process has run
  :data:`EAGER_WARMUP_ITERS` eager iterations or while an optimizer momentum buffer is missing
  (a captured first step would replay "first step" forever).
- A method whose hooks are not declared graph-safe, a data-parallel run, or a capture that fails
  steps eagerly, with a one-line :class:`FastPathWarning` saying why; never silently.

Eager and replayed iterations run the same code (:class:`StepRunner` calls one step function),
so with ``runtime.deterministic`` a run is bitwise reproducible and a resumed run equals an
uninterrupted one whichever iterations were captured.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch
from torch import Tensor, nn

from methods.base import Method, hooks_graph_safe

# Eager iterations of each process before its first capture: cuDNN autotuning, lazy CUDA
# initialisation and the optimizer's momentum buffers happen in them, never inside a capture.
EAGER_WARMUP_ITERS = 2
# Graphs kept at once (each holds its own memory pool): a capture key that keeps changing
# (LC's mu with a short C-step period) evicts the oldest instead of piling them up.
MAX_GRAPHS = 4


class FastPathWarning(UserWarning):
    """A CUDA run steps eagerly (slower) although ``runtime.cuda_graphs = "auto"``."""


@dataclass(frozen=True)
class StepPlan:
    """How a run's training iterations execute (decided once, before any compute)."""

    capture: bool = False  # replay captured CUDA graphs
    tensor_lr: bool = False  # learning rates as device tensors, fused SGD step
    channels_last: bool = False  # NHWC conv weights and inputs
    why_eager: str = ""  # why a CUDA run is not captured ("" when it is, or on the CPU)

    def as_record(self) -> dict[str, object]:
        """The plan as stored in a result's metrics."""
        return {
            "mode": "cuda_graphs" if self.capture else "eager",
            "channels_last": self.channels_last,
            "why_eager": self.why_eager,
        }


def uses_channels_last(setting: str, device_type: str, model: nn.Module) -> bool:
    """``runtime.channels_last``: "auto" means convolutional models on CUDA."""
    if setting == "off":
        return False
    has_conv = any(isinstance(m, nn.Conv2d) for m in model.modules())
    return has_conv and (setting == "on" or device_type == "cuda")


def plan_step(
    cuda_graphs: str,
    device_type: str,
    world_size: int,
    method: type[Method],
    channels_last: bool,
    run_id: str = "",
    backend_given: bool = False,
) -> StepPlan:
    """The step plan of a run; warns (once, one line) when a CUDA run cannot be captured.

    ``backend_given``: a graph backend was passed in (tests replay on the CPU with one), so the
    plan captures whatever the device.
    """
    if cuda_graphs == "off" or (device_type != "cuda" and not backend_given):
        return StepPlan(channels_last=channels_last)
    why = ""
    if world_size > 1:
        why = f"data-parallel runs ({world_size} processes) are not captured"
    elif not hooks_graph_safe(method):
        why = (
            f"method {method.name!r} does not declare its per-iteration hooks graph-safe "
            "(Method.graph_safe)"
        )
    if why:
        warn_eager(run_id, why)
        return StepPlan(channels_last=channels_last, why_eager=why)
    return StepPlan(capture=True, tensor_lr=True, channels_last=channels_last)


def warn_eager(run_id: str, why: str) -> None:
    """The one-line warning of a CUDA run that steps eagerly."""
    where = f"run {run_id}: " if run_id else ""
    warnings.warn(
        f"{where}training steps run eagerly (slower): {why}", FastPathWarning, stacklevel=3
    )


# --------------------------------------------------------------------------- learning rates


class DeviceLearningRates:
    """Each optimizer group's learning rate as a float32 tensor on the run's device.

    A Python float would be frozen into a captured graph; the tensor is filled before every
    iteration (one small kernel) and read by the fused SGD kernel on the device. The values are
    those the eager step uses: ``lr * group["lr_scale"]`` rounded to float32 as the SGD kernel
    rounds a Python learning rate.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
        self.optimizer = optimizer
        self.device = device
        self.install()

    def install(self) -> None:
        """Give every group a device tensor (again after ``optimizer.load_state_dict``)."""
        for group in self.optimizer.param_groups:
            lr = group["lr"]
            if isinstance(lr, Tensor) and lr.device == self.device and lr.dtype == torch.float32:
                continue
            value = float(lr.item() if isinstance(lr, Tensor) else lr)
            group["lr"] = torch.tensor(value, dtype=torch.float32, device=self.device)

    def set(self, lr: float) -> None:
        """Set every group's learning rate for the next iteration (no host synchronisation)."""
        for group in self.optimizer.param_groups:
            group["lr"].fill_(lr * group.get("lr_scale", 1.0))


def momentum_ready(optimizer: torch.optim.Optimizer) -> bool:
    """Whether every parameter with a gradient has its momentum buffer (else the next step is
    a "first step" that creates them, which must not be captured)."""
    for group in optimizer.param_groups:
        if group.get("momentum", 0) == 0:
            continue
        for p in group["params"]:
            if p.grad is not None and optimizer.state.get(p, {}).get("momentum_buffer") is None:
                return False
    return True


# --------------------------------------------------------------------------- graph backends


class GraphBackend(Protocol):
    """Captures a function of static tensors into something that replays it."""

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Record ``fn`` (without running it) and return the replay."""
        ...


class CudaGraphBackend:
    """``torch.cuda.CUDAGraph`` capture on a side stream, each graph with its own memory pool."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Record ``fn`` into a new CUDA graph and return its replay."""
        graph = torch.cuda.CUDAGraph()
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            # thread_local: a loader thread's CUDA calls (pinned memory) do not break capture.
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                fn()
            except BaseException:
                try:
                    graph.capture_end()
                except RuntimeError:
                    # The capture was invalidated by the error being raised: capture_end stopped
                    # before it told the CUDA generator that capture is over, and from then on
                    # every random draw outside a graph fails ("Offset increment outside graph
                    # capture encountered unexpectedly"); one capture that ends tells it.
                    self._end_generator_capture()
                raise
            graph.capture_end()
        current.wait_stream(self.stream)
        return graph.replay

    def _end_generator_capture(self) -> None:
        """Capture one small kernel into a throwaway graph (on the capture stream, where the
        caller is), so that the CUDA generator leaves the state a failed capture left it in."""
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(capture_error_mode="thread_local")
        torch.zeros(1, device=self.device)
        graph.capture_end()


class RerunBackend:
    """A stand-in for capture: the "replay" runs the step's Python again, eagerly.

    Same kernels as a captured graph, without the graph: on a GPU it tells apart what capture
    changes (nothing, bit for bit) from what the fused, tensor-lr optimizer step changes; on the
    CPU it drives the fast path's control flow in tests.
    """

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Return ``fn`` itself as the replay."""
        return fn


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- the runner


@dataclass
class _Captured:
    replay: Callable[[], None]
    inputs: Tensor
    targets: Tensor


@dataclass
class StepStats:
    """What the runner did, for the result record."""

    captures: int = 0
    replays: int = 0
    eager: int = 0
    capture_seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


class StepRunner:
    """Runs training iterations eagerly or by replaying graphs captured from the same code.

    ``step_fn(x, y, step)`` is one whole iteration after its eager preparation (learning rate,
    ``on_iteration_start``); ``key_fn(step)`` is the method's capture key for it (None: eager).
    """

    def __init__(
        self,
        plan: StepPlan,
        step_fn: Callable[[Tensor, Tensor, int], None],
        key_fn: Callable[[int], Hashable | None],
        optimizer: torch.optim.Optimizer,
        device: torch.device,
        backend: GraphBackend | None = None,
        run_id: str = "",
    ) -> None:
        self.plan = plan
        self.step_fn = step_fn
        self.key_fn = key_fn
        self.optimizer = optimizer
        self.device = device
        self.run_id = run_id
        if backend is None and plan.capture:
            backend = CudaGraphBackend(device)
        self.backend = backend
        self.graphs: dict[Hashable, _Captured] = {}
        self.stats = StepStats()
        # The shapes of the first batch: a batch of other shapes (an epoch's shorter last one,
        # per-batch padded sequences) steps eagerly rather than capturing a graph of its own.
        self.static_shapes: tuple[object, ...] | None = None

    def invalidate(self) -> None:
        """Drop every captured graph (an epoch boundary, or an eager event)."""
        self.graphs.clear()

    def layout(self, x: Tensor) -> Tensor:
        """``x`` in the plan's memory layout (NHWC images with channels_last)."""
        if self.plan.channels_last and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def run(self, x: Tensor, y: Tensor, step: int) -> float:
        """Run iteration ``step`` on batch (x, y); return the seconds spent capturing."""
        key = self._key(x, y, step)
        if key is None:
            self.step_fn(self.layout(x), y, step)
            self.stats.eager += 1
            self.invalidate()
            return 0.0
        spent = 0.0
        captured = self.graphs.get(key)
        if captured is None:
            captured, spent = self._capture(key, x, y, step)
            if captured is None:
                self.step_fn(self.layout(x), y, step)
                self.stats.eager += 1
                return spent
        captured.inputs.copy_(x)
        captured.targets.copy_(y)
        captured.replay()
        self.stats.replays += 1
        return spent

    def _key(self, x: Tensor, y: Tensor, step: int) -> Hashable | None:
        if not self.plan.capture:
            return None
        shapes = (x.shape, x.dtype, y.shape, y.dtype)
        if self.static_shapes is None:
            self.static_shapes = shapes
        done = self.stats.eager + self.stats.replays
        if done < EAGER_WARMUP_ITERS or shapes != self.static_shapes:
            return None
        # Every captured batch has the static shapes: the method's key alone tells graphs apart.
        key = self.key_fn(step)
        if key is None:
            return None
        if key not in self.graphs and not momentum_ready(self.optimizer):
            return None
        return key

    def _capture(
        self, key: Hashable, x: Tensor, y: Tensor, step: int
    ) -> tuple[_Captured | None, float]:
        assert self.backend is not None
        _sync(self.device)
        start = time.perf_counter()
        inputs = self.layout(x).clone(memory_format=torch.preserve_format)
        targets = y.clone()
        # Gradients are allocated inside the capture, in the graph's memory: every replay
        # writes them at the same addresses.
        self.optimizer.zero_grad(set_to_none=True)
        try:
            replay = self.backend.capture(lambda: self.step_fn(inputs, targets, step))
        except Exception as err:  # noqa: BLE001 - any capture error falls back, with a warning
            reason = f"capturing the step failed ({type(err).__name__}: {str(err)[:200]})"
            self.stats.failures.append(reason)
            self.plan = replace(self.plan, capture=False, why_eager=reason)
            self.invalidate()
            self.optimizer.zero_grad(set_to_none=True)
            warn_eager(self.run_id, reason)
            _sync(self.device)
            spent = time.perf_counter() - start
            self.stats.capture_seconds += spent
            return None, spent
        _sync(self.device)
        spent = time.perf_counter() - start
        self.stats.captures += 1
        self.stats.capture_seconds += spent
        captured = _Captured(replay, inputs, targets)
        if len(self.graphs) >= MAX_GRAPHS:
            del self.graphs[next(iter(self.graphs))]  # the oldest
        self.graphs[key] = captured
        return captured, spent
