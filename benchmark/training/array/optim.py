"""One SGD step for the K runs of an array, each with its own hyperparameters.

The update is PyTorch's SGD (dampening 0): ``d = g + wd * p``; ``buf = momentum * buf + d``
(a first step, from a zero buffer, gives ``buf = d`` exactly as ``torch.optim.SGD``'s clone);
``d = d + momentum * buf`` with Nesterov, else ``buf``; ``p -= lr * d``. Each run's learning rate,
weight decay, momentum and Nesterov switch are read from its own optimizer's parameter groups
(which its own schedule set for this iteration), as ``[K, G]`` tables of its G groups, and
broadcast over the ``[K, D]`` parameters: a few whole-tensor kernels whatever K and D.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from benchmark.core.errors import ConfigError
from benchmark.training.array.stack import StackedModels

HYPER = ("lr", "weight_decay", "momentum", "nesterov")


def group_columns(stacked: StackedModels, optimizers: Sequence[torch.optim.Optimizer]) -> list[int]:
    """Which parameter group holds each parameter, equal for every run (else ConfigError)."""
    columns: list[int] | None = None
    for k, opt in enumerate(optimizers):
        mine = columns_of(stacked.names, stacked.members[k], opt)
        if columns is not None and mine != columns:
            raise ConfigError(
                "runtime.array", k, "runs whose optimizers group the parameters alike"
            )
        columns = mine
    assert columns is not None
    return columns


def columns_of(
    names: Sequence[str], params: Sequence[Tensor], optimizer: torch.optim.Optimizer
) -> list[int]:
    """Which of ``optimizer``'s groups holds each of ``params`` (named ``names``);
    ConfigError when it leaves one out."""
    where = {id(p): g for g, group in enumerate(optimizer.param_groups) for p in group["params"]}
    missing = [n for n, p in zip(names, params, strict=True) if id(p) not in where]
    if missing:
        raise ConfigError("runtime.array", missing[:3], "methods that optimise every parameter")
    return [where[id(p)] for p in params]


class ArraySGD:
    """The SGD step of a :class:`StackedModels`, with every run's own hyperparameters."""

    def __init__(self, stacked: StackedModels, optimizers: Sequence[torch.optim.Optimizer]) -> None:
        self.stacked = stacked
        self.optimizers = list(optimizers)
        self.columns = group_columns(stacked, optimizers)
        self.groups = max(self.columns) + 1
        flat = stacked.flat
        self.momentum = torch.zeros_like(flat)
        # Each parameter's aligned segment of a row, its gap included (the gap stays zero).
        sizes = [stacked.offsets[i + 1] - stacked.offsets[i] for i in range(len(self.columns))]
        # The group of every column of [K, D] (only needed when there are several groups).
        self.column_group = torch.repeat_interleave(
            torch.tensor(self.columns, device=flat.device), torch.tensor(sizes, device=flat.device)
        )
        self.frozen: set[int] = set()  # runs that ended: their rows are no longer updated
        self._adopt_momentum()

    def _adopt_momentum(self) -> None:
        """Take over each run's momentum buffers (a resumed run's) and give it views of ours."""
        for k in range(self.stacked.k):
            self.adopt(k)

    def adopt(self, k: int) -> None:
        """Make run ``k``'s momentum buffers views of ours again: a buffer its optimizer holds
        (loaded from a checkpoint) is copied in, a missing one (a cleared optimizer state, a
        fresh start) is zero, which makes the next step's buffer the gradient, as torch's."""
        st = self.stacked
        opt = self.optimizers[k]
        with torch.no_grad():
            for i, p in enumerate(st.members[k]):
                group = opt.param_groups[self.columns[i]]
                if group.get("momentum", 0) == 0:
                    continue
                view = st.row(k, i, self.momentum)
                held = opt.state.get(p, {}).get("momentum_buffer")
                if held is None:
                    view.zero_()
                elif held.data_ptr() != view.data_ptr():
                    view.copy_(held)
                opt.state[p]["momentum_buffer"] = view

    def check(self, params: Sequence[Tensor], optimizer: torch.optim.Optimizer) -> None:
        """Refuse (ConfigError) a run whose ``optimizer`` groups its ``params`` (in the
        array's order) otherwise than the array's runs do."""
        if columns_of(self.stacked.names, params, optimizer) != self.columns:
            raise ConfigError(
                "runtime.array", "a run", "runs whose optimizers group the parameters alike"
            )

    def place(self, k: int, optimizer: torch.optim.Optimizer) -> None:
        """Make ``optimizer`` (checked: :meth:`check`) the one of the run now in slot ``k`` (its
        parameters are the slot's, :meth:`StackedModels.place`): its hyperparameters fill row
        ``k`` of the tables and its momentum the slot's row (zero for a fresh start)."""
        self.optimizers[k] = optimizer
        self.frozen.discard(k)
        self.adopt(k)

    def freeze(self, k: int) -> None:
        """Stop updating run ``k`` (it ended: diverged or failed) without touching the others."""
        self.frozen.add(k)

    def tables(self) -> Tensor:
        """Every run's and group's hyperparameters, ``[len(HYPER), K, G]`` float32 on the
        device, in one copy that does not wait for the device (pinned memory on CUDA: a copy
        from pageable memory would wait for all the work queued before it)."""
        rows = []
        for key in HYPER:
            table = []
            for k, opt in enumerate(self.optimizers):
                row = []
                for group in opt.param_groups[: self.groups]:
                    value = group.get(key, 0.0)
                    value = float(value.item() if isinstance(value, Tensor) else value)
                    row.append(0.0 if k in self.frozen and key != "nesterov" else value)
                table.append(row)
            rows.append(table)
        host = torch.tensor(rows, dtype=torch.float32)
        device = self.stacked.flat.device
        if device.type == "cuda":
            # A fresh pinned tensor each step: the host allocator keeps its block until the
            # copy has run, so the next step never overwrites values still being copied.
            return host.pin_memory().to(device, non_blocking=True)
        return host.to(device)

    def coefficient(self, table: Tensor) -> Tensor:
        """A ``[K, G]`` table broadcast to the ``[K, D]`` parameters (``[K, 1]`` with one group)."""
        if self.groups == 1:
            return table
        return table[:, self.column_group]

    def step(self) -> None:
        """One SGD step of every run from the gradients in ``stacked.grad``."""
        self.update_from(self.tables())

    def update_from(self, tables: Tensor) -> None:
        """The SGD update with the hyperparameters ``tables`` (as :meth:`tables` gives)."""
        self.update(*(self.coefficient(table) for table in tables))

    @torch.no_grad()
    def update(self, lr: Tensor, wd: Tensor, mom: Tensor, nesterov: Tensor) -> None:
        """The SGD update with these coefficients (``[K, D]`` or ``[K, 1]`` device tensors, as
        :meth:`coefficient` gives): device work only, so a CUDA graph can capture it."""
        st = self.stacked
        p, g, buf = st.flat, st.grad, self.momentum
        d = torch.addcmul(g, p, wd)
        buf.mul_(mom).add_(d)
        # Nesterov per run: 1 -> d + momentum * buf, 0 -> buf (exact: a product by 1 or 0).
        d = torch.addcmul(d, buf, mom).mul_(nesterov).addcmul_(buf, 1 - nesterov)
        p.addcmul_(d, lr, value=-1.0)
