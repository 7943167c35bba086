"""``python -m benchmark.bench.weights``: bytes of final weights files at 90/95/99% sparsity.

For ResNet-56 (CIFAR-10) and WRN-28-10 (CIFAR-100), freshly initialised and pruned by global
magnitude with the mask multiplied in (as training does, so each pruned negative weight is
``-0.0``): the dense file the store wrote before, the packed file it writes now
(:func:`benchmark.core.files.save_weights`, checked to load back bit for bit), torch's sparse
COO and CSR formats for comparison (which drop the signs of zeros), and the dry run's estimate.
"""

from __future__ import annotations

import argparse
import io
import tempfile
from pathlib import Path

import torch

from benchmark.core.files import load_checkpoint, save_weights
from benchmark.models.registry import build_model
from benchmark.pruning import prunable_parameters
from benchmark.store.footprint import format_bytes, run_bytes
from benchmark.training.footprint import model_tensors

MODELS = (("resnet56", "cifar10", 10), ("wrn28_10", "cifar100", 100))
SPARSITIES = (0.90, 0.95, 0.99)


def pruned_state(model: str, classes: int, sparsity: float, seed: int = 0) -> dict:
    """``model`` at init with its smallest ``sparsity`` of prunable weights masked to zero."""
    torch.manual_seed(seed)
    net = build_model(model, classes, (3, 32, 32))
    names = [name for name, _ in prunable_parameters(net)]
    state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    if sparsity <= 0:
        return state  # dense
    flat = torch.cat([state[n].abs().reshape(-1) for n in names])
    threshold = flat.kthvalue(round(sparsity * flat.numel())).values
    for name in names:
        state[name].mul_(state[name].abs() > threshold)
    return state


def nbytes(obj: object) -> int:
    """The bytes torch.save writes for ``obj``."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.tell()


def torch_sparse(state: dict, layout: str) -> dict:
    """Every floating tensor of 2+ dimensions as a 2-D torch sparse COO or CSR tensor."""
    out = {}
    for name, value in state.items():
        if value.is_floating_point() and value.dim() > 1:
            matrix = value.reshape(value.shape[0], -1)
            out[name] = matrix.to_sparse() if layout == "coo" else matrix.to_sparse_csr()
        else:
            out[name] = value
    return out


def identical(a: dict, b: dict) -> bool:
    """Bit for bit, floats compared as integers of the same width."""
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}
    for name in a:
        x, y = a[name].contiguous(), b[name].contiguous()
        if x.is_floating_point():
            x, y = x.view(ints[x.element_size()]), y.view(ints[y.element_size()])
        if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
            return False
    return list(a) == list(b)


def main(argv: list[str] | None = None) -> None:
    """Print one line per model and sparsity."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    header = f"{'model':9} {'sparsity':>8} {'dense':>10} {'packed':>18} {'estimate':>10}"
    print(f"{header} {'torch COO':>18} {'torch CSR':>18}  bit-identical")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.pt"
        for model, data, classes in MODELS:
            tensors = model_tensors(model, data, ())
            for sparsity in SPARSITIES:
                state = pruned_state(model, classes, sparsity)
                dense = nbytes(state)
                save_weights(state, path)
                packed = path.stat().st_size
                same = identical(load_checkpoint(path), state)
                estimate = run_bytes(tensors or (), 1 - sparsity)[1]
                coo, csr = nbytes(torch_sparse(state, "coo")), nbytes(torch_sparse(state, "csr"))

                def share(n: int, dense: int = dense) -> str:
                    return f"{format_bytes(n)} ({n / dense:5.1%})"

                print(
                    f"{model:9} {sparsity:8.0%} {format_bytes(dense):>10} {share(packed):>18} "
                    f"{format_bytes(estimate):>10} {share(coo):>18} {share(csr):>18}  {same}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
