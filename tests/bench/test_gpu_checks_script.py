"""The prepared GPU script (benchmark/gpu_checks.sh) asks its benchmarks only for what they accept.

A device session is a few scarce minutes, run once: a renamed flag, a removed mode or a method
name the registry no longer knows would be found only there, after the machine's start-up was paid
for. Each benchmark command of the script is run here with its own arguments as written, moved to
the CPU: `bench` trains each of its configurations for an iteration; the pipelines stop where they
would write 50,000 stand-in images; the fast-path check stops where it needs CUDA.
"""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest
import torch

import benchmark.bench.check_fast_path as check_fast_path
import benchmark.bench.pack as bench_pack
import benchmark.bench.pipeline as bench_pipeline
import benchmark.bench.speedup as bench_speedup
import benchmark.bench.throughput as bench

SCRIPT = Path(__file__).resolve().parents[2] / "benchmark" / "gpu_checks.sh"


class ArgumentsAccepted(Exception):
    """Raised where a benchmark starts its real work, after every argument check passed."""


def script_commands(text: str) -> list[tuple[str, list[str]]]:
    """Each ``$PY -m benchmark.X ARGS`` of a shell script: module name and arguments.

    Continued lines are joined; redirections, pipes and a trailing ``&`` end the arguments.
    """
    joined = text.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = re.search(r"\$PY -m (benchmark(?:\.\w+)+)(.*)", line)
        if not match:
            continue
        words = shlex.split(match.group(2), comments=False, posix=True)
        args: list[str] = []
        for word in words:
            if word in {"|", "&", "2>&1"} or word.startswith((">", "2>")):
                break
            args.append(word)
        commands.append((match.group(1), args))
    return commands


def test_the_script_parser_finds_arguments_and_stops_at_redirections() -> None:
    text = (
        "# $PY -m benchmark.commented --x\n"
        "timeout 5 $PY -m benchmark.bench --a 1 \\\n    --b two 2>&1 | tee log\n"
        'timeout 5 $PY -m benchmark.bench.check_fast_path >"$LOGS/c.log" 2>&1 &\n'
    )
    assert script_commands(text) == [
        ("benchmark.bench", ["--a", "1", "--b", "two"]),
        ("benchmark.bench.check_fast_path", []),
    ]


def test_the_script_runs_every_benchmark_it_is_meant_to() -> None:
    modules = [module for module, _ in script_commands(SCRIPT.read_text())]
    assert sorted(set(modules)) == [
        "benchmark.bench",
        "benchmark.bench.check_fast_path",
        "benchmark.bench.pack",
        "benchmark.bench.pipeline",
        "benchmark.bench.speedup",
    ]
    for module in modules:  # each is importable and has the entry point the script runs
        entry = importlib.import_module(module)
        if hasattr(entry, "__path__"):  # a package: `python -m` runs its __main__
            entry = importlib.import_module(f"{module}.__main__")
        assert callable(entry.main)


# Appended after the script's own arguments (argparse keeps the last value of a flag): the CPU,
# the smallest model and batch, one timed iteration.
ON_CPU = {
    "benchmark.bench": ["--device", "cpu", "--model", "resnet20", "--batch", "2", "--iters", "1"],
    "benchmark.bench.pack": ["--device", "cpu", "--batch", "2", "--iters", "3", "--k", "1,2"],
    "benchmark.bench.pipeline": ["--device", "cpu"],
    "benchmark.bench.speedup": ["--device", "cpu", "--repeats", "1", "--warmup", "0"],
    "benchmark.bench.check_fast_path": [],
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "index", range(len(script_commands(SCRIPT.read_text()))), ids=lambda i: f"command{i}"
)
def test_each_script_command_passes_its_benchmarks_argument_checks(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    module, args = script_commands(SCRIPT.read_text())[index]
    args = [str(tmp_path / "cifar") if a == "$CIFAR" else a for a in args]
    assert not [a for a in args if "$" in a], f"unexpanded shell variable in {args}"

    def accepted(*_args: object, **_kwargs: object) -> None:
        raise ArgumentsAccepted

    if module == "benchmark.bench":
        # Runs for real, on the CPU: every configuration is built and trained for an iteration.
        bench.main([*args, *ON_CPU[module]])
        out = capsys.readouterr().out
        for name in _listed(args, "--methods", all_of=bench.timed_methods("all")):
            assert re.search(rf"^{name}\s+\d", out, re.M), f"no figure for {name} in:\n{out}"
        for name in _listed(args, "--models"):
            assert re.search(rf"^{name}\s+\d", out, re.M), f"no figure for {name} in:\n{out}"
        return
    if module == "benchmark.bench.pack":
        # Runs for real, on the CPU, with the small models swapped in: a figure per model and K.
        models = _listed(args, "--models")
        bench_pack.main([*args, *ON_CPU[module], "--models", "resnet20"])
        out = capsys.readouterr().out
        assert models and re.search(r"^resnet20\s+K", out, re.M), out
        assert re.findall(r"^\s+(\d+)\s+\d", out, re.M) == ["1", "2"], out
        return
    if module == "benchmark.bench.speedup":
        monkeypatch.setattr(bench_speedup, "filter_rows", accepted)
        with pytest.raises(ArgumentsAccepted):
            bench_speedup.main([*args, *ON_CPU[module]])
        return
    if module == "benchmark.bench.pipeline":
        monkeypatch.setattr(bench_pipeline, "ensure_cifar", accepted)
        with pytest.raises(ArgumentsAccepted):
            bench_pipeline.main([*args, *ON_CPU[module]])
        return
    assert module == "benchmark.bench.check_fast_path"
    # Without CUDA it checks every case's configuration, then says that nothing was captured.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert check_fast_path.main(args) == 1
    assert "no CUDA device" in capsys.readouterr().out


def _listed(args: list[str], flag: str, all_of: list[str] | None = None) -> list[str]:
    """The comma-separated names after ``flag`` in ``args`` ('all' stands for ``all_of``)."""
    if flag not in args:
        return []
    names = args[args.index(flag) + 1].split(",")
    return list(all_of) if names == ["all"] and all_of is not None else names


FIRST_MODELS = "allowed: causal_lm, cnn_small,"  # the registry's names, sorted


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--methods", "all,gmpp"], "--methods = 'all,gmpp' is invalid; allowed: all alone"),
        (["--methods", "gmp,gmpp"], "--methods = 'gmpp' is invalid; allowed: bimp,"),
        (["--models", "resnet18,vgg"], f"--model(s) = 'vgg' is invalid; {FIRST_MODELS}"),
        (["--model", "resnt"], f"--model(s) = 'resnt' is invalid; {FIRST_MODELS}"),
    ],
)
def test_bench_refuses_an_unknown_name_before_timing_anything(
    argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    def timed(*_args: object, **_kwargs: object) -> float:
        raise AssertionError("a benchmark was timed before the names were checked")

    monkeypatch.setattr(bench, "bare_loop", timed)
    with pytest.raises(SystemExit) as exit_info:
        bench.main([*argv, "--device", "cpu"])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_scripts_time_limits_leave_room_for_the_install_in_one_device_call() -> None:
    # A device call runs at most 600 s, and the install before the script takes ~30 s. Steps
    # sent to the background (a trailing "&") run beside the next one and add nothing.
    lines = SCRIPT.read_text().replace("\\\n", " ").splitlines()
    limits = [
        int(match.group(1))
        for line in lines
        if (match := re.match(r"\s*timeout (\d+) ", line)) and not line.rstrip().endswith("&")
    ]
    assert len(limits) >= 6  # pack, bench, pipeline, the suite, speedup, per layer
    assert sum(limits) <= 540, f"the step limits add up to {sum(limits)} s"
