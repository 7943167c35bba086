"""Memory and time of a one-shot prune of a random language model, against its weights' size.

``python -m benchmark.bench.llm_memory --shape 1b --dtype bfloat16 --offload on,off``

A random Llama of the given shape (``1b``: TinyLlama-1.1B's, ``7b``: Llama-2-7B's, ``tiny``: a
2-layer test shape) is saved as a ``save_pretrained`` folder (in ``--dtype``, built on the meta
device and filled in place, so building it never holds a float32 copy), then each setting runs
as ``prunebench run`` would run it (``model.name = "causal_lm"``, the folder as
``model.pretrained``, byte tokens) in a process of its own, on small WikiText-2-format files it
writes (so evaluation costs little). Printed per setting: the process's peak resident memory,
the peak device memory (CUDA only: the allocator's high-water mark from the model's loading
on), the seconds before training (loading, calibration, prune, evaluation), the weights' bytes
and the harness's estimate of the device peak. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPES = {
    "tiny": {"hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 4},
    "1b": {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
           "num_attention_heads": 32, "num_key_value_heads": 4},
    "7b": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 32},
}  # fmt: skip


def write_model(folder: Path, shape: str, dtype: str) -> int:
    """A random Llama of ``shape`` in ``dtype`` saved to ``folder``; returns its weight bytes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32000, max_position_embeddings=4096, **SHAPES[shape])
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model.to_empty(device="cpu").to(getattr(torch, dtype))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    model.save_pretrained(folder)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def write_data(root: Path, length: int) -> None:
    """WikiText-2-format evaluation files (12 windows of ``length`` byte tokens per split, for
    ``length`` 128; at least 3) and a C4 shard of documents longer than a window."""
    words = max(64, 3 * length // 24)
    text = " ".join(f"word{i % 97} and more text {i}" for i in range(words))
    folder = root / "wikitext-2-raw"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("wiki.train.raw", "wiki.valid.raw", "wiki.test.raw"):
        (folder / name).write_text(text + "\n", encoding="utf-8")
    with gzip.open(root / "c4-train.00000-of-01024.json.gz", "wt", encoding="utf-8") as f:
        for i in range(8):
            f.write(json.dumps({"text": f"document {i} " + text}) + "\n")


def run_config(
    folder: Path, data: Path, store: Path, args: argparse.Namespace, offload: str
) -> dict:
    """The run's config as a nested dict."""
    return {
        "data": {"name": "wikitext2", "root": str(data), "max_length": args.length,
                 "tokenizer": "bytes", "batch_size": 1, "eval_batch_size": 4},
        "model": {"name": "causal_lm", "pretrained": str(folder), "dtype": args.dtype},
        "optim": {"name": "adamw", "weight_decay": 0.0},
        "method": {"name": args.method, "sparsity": 0.5, "calibration_samples": args.samples},
        "runtime": {"device": args.device, "offload": offload},
        "logging": {"progress": False},
        "output": {"dir": str(store)},
    }  # fmt: skip


CHILD = """
import json, sys, time
from benchmark.config.parse import config_from_dict
from benchmark.training.runner import execute
from methods import get_method
cfg = config_from_dict(json.loads(sys.argv[1]))
began = time.perf_counter()
record = execute(cfg)
m = record["metrics"]
print(json.dumps({"rss": m["peak_host_memory_bytes"], "device": m.get("peak_memory_bytes"),
    "setup": m["setup_seconds"], "offloaded": m["offloaded"], "ppl": m["test"]["ppl"],
    "seconds": time.perf_counter() - began,
    "estimate": get_method(cfg.method.name).memory_estimate(cfg)}))
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's arguments (checked before anything is written)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="bfloat16")
    parser.add_argument("--offload", default="on,off", help="settings to run, comma-separated")
    parser.add_argument("--method", default="wanda", help="wanda, sparsegpt, oneshot_magnitude")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--length", type=int, default=128, help="data.max_length")
    parser.add_argument("--samples", type=int, default=8, help="calibration windows")
    parser.add_argument(
        "--model-dir",
        default=None,
        help="keep the random model here and reuse it when it is there (default: a temporary "
        "folder, written anew)",
    )
    args = parser.parse_args(argv)
    bad = [s for s in args.offload.split(",") if s not in ("on", "off", "auto")]
    if bad:
        parser.error(f"--offload: {bad[0]!r} is not one of on, off, auto")
    return args


def main(argv: list[str] | None = None) -> None:
    """Print the peak memories of a one-shot prune per offload setting."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = Path(args.model_dir) if args.model_dir else root / "model"
        began = time.perf_counter()
        if (model / "config.json").is_file():
            weights = sum(f.stat().st_size for f in model.glob("*.safetensors"))
            print(f"{args.shape} Llama from {model}: weights {weights / 2**30:.2f} GiB")
        else:
            weights = write_model(model, args.shape, args.dtype)
            print(f"{args.shape} Llama, {args.dtype}: weights {weights / 2**30:.2f} GiB "
                  f"(written in {time.perf_counter() - began:.0f} s)", flush=True)  # fmt: skip
        write_data(root / "data", args.length)
        for offload in args.offload.split(","):
            store = root / f"runs-{offload}"
            cfg = json.dumps(run_config(model, root / "data", store, args, offload))
            out = subprocess.run(
                [sys.executable, "-c", CHILD, cfg], capture_output=True, text=True, check=False
            )
            if out.returncode:
                print(f"offload={offload}: failed\n{out.stderr[-2000:]}", flush=True)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            device = "-" if r["device"] is None else f"{r['device'] / 2**30:.2f} GiB"
            print(
                f"offload={offload} ({'offloaded' if r['offloaded'] else 'whole'}): peak RSS "
                f"{r['rss'] / 2**30:.2f} GiB ({r['rss'] / weights:.2f}x the weights), peak "
                f"device {device}, estimated device peak {r['estimate'] / 2**30:.2f} GiB; "
                f"{r['setup']:.0f} s before training, {r['seconds']:.0f} s in all; "
                f"test PPL {r['ppl']:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
