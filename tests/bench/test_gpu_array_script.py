"""The array session's GPU script (benchmark/gpu_array_checks.sh) asks its benchmarks only for
what they accept, and fits one device call; its array benchmark runs on the CPU at tiny size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_gpu_checks_script import ArgumentsAccepted, script_commands

import benchmark.bench.array as bench_array
import benchmark.bench.check_fast_path as check_fast_path
import benchmark.bench.pipeline as bench_pipeline

SCRIPT = Path(__file__).resolve().parents[2] / "benchmark" / "gpu_array_checks.sh"
# Appended after the script's own arguments (argparse keeps the last value): the CPU, tiny.
ON_CPU = ["--device", "cpu", "--tiny", "--k", "1,2", "--pack-k", "1", "--models", "cnn_small"]


def test_the_script_runs_the_essentials_then_the_array_benchmark() -> None:
    modules = [module for module, _ in script_commands(SCRIPT.read_text())]
    assert modules == [
        "benchmark.bench.check_fast_path",
        "benchmark.bench.pipeline",
        "benchmark.bench.array",
        "benchmark.bench.array",
        "benchmark.bench.array",
        "benchmark.bench.array",
    ]
    parts = [args[args.index("--parts") + 1] for _, args in script_commands(SCRIPT.read_text())
             if "--parts" in args]  # fmt: skip
    assert parts == ["layer", "model", "model", "equality"]


def test_the_scripts_time_limits_fit_one_device_call() -> None:
    lines = SCRIPT.read_text().replace("\\\n", " ").splitlines()
    limits = [
        int(match.group(1))
        for line in lines
        if (match := re.match(r"\s*timeout (\d+) ", line)) and not line.rstrip().endswith("&")
    ]
    assert len(limits) == 6 and sum(limits) <= 560, limits


@pytest.mark.parametrize("index", range(len(script_commands(SCRIPT.read_text()))))
def test_each_script_command_runs_on_the_cpu(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    module, args = script_commands(SCRIPT.read_text())[index]
    args = [str(tmp_path / "cifar") if a == "$CIFAR" else a for a in args]

    def accepted(*_args: object, **_kwargs: object) -> None:
        raise ArgumentsAccepted

    if module == "benchmark.bench.check_fast_path":
        monkeypatch.setattr(check_fast_path.torch.cuda, "is_available", lambda: False)
        assert check_fast_path.main(args) == 1
        return
    if module == "benchmark.bench.pipeline":
        monkeypatch.setattr(bench_pipeline, "ensure_cifar", accepted)
        with pytest.raises(ArgumentsAccepted):
            bench_pipeline.main([*args, "--device", "cpu"])
        return
    assert module == "benchmark.bench.array"
    # The equality check trains seven runs: tests/training/test_array.py runs it on the CPU.
    monkeypatch.setattr(bench_array, "check_array", accepted)
    try:
        bench_array.main([*args, *ON_CPU])
    except ArgumentsAccepted:
        assert "equality" in args
        return
    except SystemExit as done:
        assert done.code == 0
    out = capsys.readouterr().out
    if "layer" in args:
        assert re.search(r"^fp32 C=8 8x8\s+K\s+grouped\s+separate\s+vmap", out, re.M), out
        assert re.search(r"^bf16 C=8", out, re.M), out
    else:
        mode = args[args.index("--modes") + 1]
        cores = r"core grouped\s+packing"
        head = rf"^cnn_small {mode}\s+K\s+(array vmap\s+)?array grouped\s+{cores}"
        assert re.search(head, out, re.M), out
        assert not re.search(r"^\s+\d+\s.*[A-Z][a-z]+Error", out, re.M), out  # every cell a figure
        assert len(re.findall(r"^\s+2(\s+[\d,]+)+\s+-\s+[\d,]+$", out, re.M)) == 1, out
