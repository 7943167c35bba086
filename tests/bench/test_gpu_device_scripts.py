"""The two device scripts of the GPU work (benchmark/gpu_correctness.sh, benchmark/gpu_speed.sh)
fit a device session (each under 240 s of steps, so that a rerun fits the 15 minutes), ask their
benchmarks only for what they accept, and need nothing from the network (gpu_wheels.sh)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from test_gpu_checks_script import ArgumentsAccepted, script_commands

import benchmark.bench.array as bench_array
import benchmark.bench.check_fast_path as check_fast_path

BENCH = Path(__file__).resolve().parents[2] / "benchmark"
CORRECTNESS, SPEED = BENCH / "gpu_correctness.sh", BENCH / "gpu_speed.sh"
SCRIPTS = {"correctness": CORRECTNESS, "speed": SPEED}
# Appended after a script's own arguments (argparse keeps the last value): the CPU, tiny.
ON_CPU = ["--device", "cpu", "--tiny", "--k", "2", "--pack-k", "1", "--models", "cnn_small"]


def limits(script: Path) -> tuple[list[int], list[int]]:
    """The ``timeout`` limits of the script's steps: in the foreground, in the background."""
    lines = script.read_text().replace("\\\n", " ").splitlines()
    front, back = [], []
    for line in lines:
        match = re.match(r"\s*timeout (\d+) ", line)
        if match:
            (back if line.rstrip().endswith("&") else front).append(int(match.group(1)))
    return front, back


def test_each_script_fits_240_seconds_of_steps() -> None:
    front, back = limits(CORRECTNESS)
    assert len(front) == 1 and max(front + back) <= 240  # side by side: the longest counts
    front, back = limits(SPEED)
    assert not back and sum(front) <= 240, front


def test_the_correctness_script_runs_the_suite_the_fast_path_and_both_equalities() -> None:
    text = CORRECTNESS.read_text()
    assert re.search(r"-m pytest .*--tb=short -rfs", text.replace("\\\n", " "))
    assert "PRUNEBENCH_FAILURE_LOG" in text
    commands = script_commands(text)
    assert [m for m, _ in commands] == ["benchmark.bench.check_fast_path"] + [
        "benchmark.bench.array"
    ] * 2
    assert [
        a[a.index("--compile") + 1] if "--compile" in a else "off" for _, a in commands[1:]
    ] == [
        "off",
        "on",
    ]


def test_the_speed_script_compares_compiled_and_uncompiled_arrays_in_bf16_and_fp32() -> None:
    commands = script_commands(SPEED.read_text())
    seen = {(a[a.index("--modes") + 1], a[a.index("--compile") + 1]) for _, a in commands}
    assert seen == {("fast-bf16", "off"), ("fast-bf16", "on"), ("fast", "on")}


def test_the_wheels_script_names_what_the_device_image_lacks() -> None:
    text = (BENCH / "gpu_wheels.sh").read_text()
    for name in ("tomli-w", "submitit", "torch-pruning", "pycocotools"):
        assert re.search(rf"\b{name}==", text), name
    assert "--python-version 3.12" in text and "--only-binary=:all:" in text
    env = (BENCH / "gpu_env.sh").read_text()
    assert ".whl/*.whl" in env and "--no-index" in env  # installed there without network


@pytest.mark.parametrize(
    ("script", "index"),
    [
        (name, i)
        for name, path in SCRIPTS.items()
        for i in range(len(script_commands(path.read_text())))
    ],  # fmt: skip
)
def test_each_device_script_command_runs_on_the_cpu(
    script: str,
    index: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    module, args = script_commands(SCRIPTS[script].read_text())[index]
    if module == "benchmark.bench.check_fast_path":
        monkeypatch.setattr(check_fast_path.torch.cuda, "is_available", lambda: False)
        assert check_fast_path.main(args) == 1
        return
    assert module == "benchmark.bench.array"
    # Compiling is tested in tests/training/test_array_capture.py; here the arguments are.
    monkeypatch.setattr(torch, "compile", lambda fn, **_: fn)
    asked: list[tuple] = []

    def accepted(*given: object) -> None:
        asked.append(given)
        raise ArgumentsAccepted

    # The equality check trains seven runs: tests/training/test_array.py runs it on the CPU.
    monkeypatch.setattr(bench_array, "check_array", accepted)
    try:
        bench_array.main([*args, *ON_CPU])
    except ArgumentsAccepted:
        assert "equality" in args
        compile_setting = args[args.index("--compile") + 1] if "--compile" in args else "off"
        assert f"runtime.compile={compile_setting}" in asked[0][3]
        return
    except SystemExit as done:
        assert done.code == 0
    out = capsys.readouterr().out
    mode, setting = args[args.index("--modes") + 1], args[args.index("--compile") + 1]
    assert re.search(rf"^cnn_small {mode} compile={setting}\s+K\s+array grouped\s+timed", out, re.M)
    assert re.search(r"^\s+2(\s+[\d,]+){3}\s+(-|[\d,]+)\s+(-|[\d,]+)$", out, re.M), out


def test_the_kernel_benchmark_prints_each_way_each_variant_and_a_breakdown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import benchmark.bench.array_kernels as kernels

    monkeypatch.setattr(torch, "compile", lambda fn, **_: fn)  # compiling: test_array_capture
    kernels.main(["--device", "cpu", "--tiny", "--k", "2", "--precisions", "bf16",
                  "--variants", "base,wcl+fp16,compile"])  # fmt: skip
    out = capsys.readouterr().out
    assert re.search(r"^bf16 K=2 .*grouped .*grouped wcl .*separate .*streams .*fastest", out, re.M)
    for variant in ("base", "wcl\\+fp16", "compile"):
        assert re.search(rf"^bf16 K=2 +{variant} [\d,]+ ", out, re.M), (variant, out)
    assert re.search(r"^  convolution +[\d.]+ ms", out, re.M), out
    with pytest.raises(SystemExit):
        kernels.main(["--variants", "base,turbo"])
    assert "--variants = 'base,turbo' is invalid; allowed: base, wcl, fp16, compile" in (
        capsys.readouterr().err
    )
