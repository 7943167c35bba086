"""The prepared language-model GPU script (benchmark/gpu_llm.sh) asks its benchmark only for what
it accepts, and the benchmark runs end to end on the CPU with the tiny shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gpu_checks_script import script_commands

from benchmark.bench import llm_memory

SCRIPT = Path(__file__).resolve().parents[2] / "benchmark" / "gpu_llm.sh"


def test_every_command_of_the_script_passes_the_benchmark_s_argument_checks() -> None:
    commands = script_commands(SCRIPT.read_text())
    assert [module for module, _ in commands] == ["benchmark.bench.llm_memory"] * 2
    settings = []
    for _, args in commands:
        args = [a.replace('"$MODEL"', "/tmp/m").replace("$MODEL", "/tmp/m") for a in args]
        parsed = llm_memory.parse_args(args)
        assert parsed.shape == "7b" and parsed.dtype == "float16" and parsed.device == "cuda"
        settings.append(parsed.offload)
    assert settings == ["on", "off"]
    with pytest.raises(SystemExit):
        llm_memory.parse_args(["--offload", "sometimes"])


@pytest.mark.slow
def test_the_benchmark_prunes_a_tiny_random_llama_on_the_cpu(tmp_path: Path, capsys) -> None:
    llm_memory.main(["--shape", "tiny", "--device", "cpu", "--offload", "on",
                     "--model-dir", str(tmp_path / "model")])  # fmt: skip
    out = capsys.readouterr().out
    assert "offload=on (offloaded): peak RSS" in out and "estimated device peak" in out
    assert (tmp_path / "model" / "config.json").is_file()  # kept for the next call
