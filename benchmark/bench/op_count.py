"""Count the tensor operations a piece of code runs: a device-free proxy for kernel launches.

On a GPU a training step of a small model is launch-bound: its time grows with the number of
kernels, not with their work. Every aten operation below autograd that computes something
launches at least one kernel on CUDA; views and metadata operations launch none. Counting
those operations on the CPU therefore tells how many launches a change adds or saves, where no
GPU is at hand (benchmark.bench --ops prints it per method).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from benchmark.training.trainer import Trainer

# Operations that only make views or read metadata: no kernel on a GPU.
NO_KERNEL = frozenset(
    {
        "alias",
        "as_strided",
        "detach",
        "empty",
        "empty_like",
        "empty_strided",
        "expand",
        "lift_fresh",
        "new_empty",
        "new_empty_strided",
        "narrow",
        "permute",
        "reshape",
        "_reshape_alias",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "squeeze",
        "t",
        "transpose",
        "unbind",
        "unsqueeze",
        "view",
        "_unsafe_view",
    }
)


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        name = func.overloadpacket.__name__
        if name not in NO_KERNEL:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def count_ops(fn: Callable[[], Any]) -> Counter[str]:
    """The computing operations ``fn()`` runs (forward and backward), by name."""
    counter = _Counter()
    with counter:
        fn()
    return counter.ops


def training_pass(trainer: Trainer, x: Tensor, y: Tensor) -> Tensor:
    """One forward and backward pass of ``trainer``'s model and method on (x, y); the loss.

    What a training iteration computes before the optimizer step (whose per-parameter loop on
    the CPU is one fused kernel on a GPU, so it is left out of the counts).
    """
    trainer.model.train()
    trainer.optimizer.zero_grad(set_to_none=True)
    loss = trainer.task.loss(trainer.model, x, y)
    extra = trainer.method.extra_loss(0)
    if extra is not None:
        loss = loss + extra
    loss.backward()
    return loss.detach()
