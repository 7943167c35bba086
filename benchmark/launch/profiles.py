"""Cluster profiles (``slurm/profiles/*.toml``): where and how SLURM array tasks run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.config.run import check
from benchmark.core.errors import ConfigError
from benchmark.core.tomlfile import load_toml

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class SlurmProfile:
    """A cluster profile (``slurm/profiles/*.toml``): where and how array tasks run."""

    partition: str
    account: str
    qos: str
    constraint: str
    gpus_per_task: int
    cpus_per_task: int
    mem_gb: float
    time_min: int
    signal_delay_s: int
    array_parallelism: int
    # Data-parallel runs: processes (one per GPU) per node, and nodes, training each run.
    tasks_per_node: int = 1
    nodes: int = 1

    @property
    def processes_per_run(self) -> int:
        """Processes (data-parallel ranks; one per GPU on GPU clusters) that train one run."""
        return self.tasks_per_node * self.nodes

    def executor_parameters(self) -> dict[str, Any]:
        """Parameters of ``submitit.SlurmExecutor`` ("" and 0 mean: do not pass the option)."""
        params: dict[str, Any] = {
            "cpus_per_task": self.cpus_per_task,
            "time": self.time_min,
            "signal_delay_s": self.signal_delay_s,
            "array_parallelism": self.array_parallelism,
        }
        for key in ("partition", "account", "qos", "constraint"):
            if getattr(self, key):
                params[key] = getattr(self, key)
        if self.gpus_per_task:
            params["gpus_per_task"] = self.gpus_per_task
        if self.mem_gb:
            gb = float(self.mem_gb)
            params["mem"] = f"{int(gb)}G" if gb.is_integer() else f"{int(gb * 1024)}M"
        if self.processes_per_run > 1:
            params["ntasks_per_node"] = self.tasks_per_node
            params["nodes"] = self.nodes
            # One rank failing ends the others at once instead of at the collective timeout.
            params["srun_args"] = ["--kill-on-bad-exit=1"]
        return params


PROFILE_RULES: dict[str, tuple[type, Callable[[Any], bool], str]] = {
    "partition": (str, lambda v: True, "a string"),
    "account": (str, lambda v: True, "a string"),
    "qos": (str, lambda v: True, "a string"),
    "constraint": (str, lambda v: True, "a string"),
    "gpus_per_task": (int, lambda v: v >= 0, "an integer >= 0"),
    "cpus_per_task": (int, lambda v: v >= 1, "an integer >= 1"),
    "mem_gb": (
        float,
        lambda v: 0 <= v < 1e9,  # finite: SLURM takes a whole number of MB
        "a number >= 0 (0: the partition's default)",
    ),
    "time_min": (int, lambda v: v >= 1, "whole minutes >= 1"),
    "signal_delay_s": (int, lambda v: v >= 0, "an integer >= 0"),
    "array_parallelism": (int, lambda v: v >= 1, "an integer >= 1"),
    "tasks_per_node": (int, lambda v: v >= 1, "an integer >= 1 (processes per node and run)"),
    "nodes": (int, lambda v: v >= 1, "an integer >= 1 (nodes per run)"),
}
# Keys a profile may leave out (profiles written before data-parallel runs existed).
PROFILE_DEFAULTS: dict[str, Any] = {"tasks_per_node": 1, "nodes": 1}


def profile_path(name: str | Path) -> Path:
    """The profile file: a path, or a name under ``slurm/profiles/`` (here, then the repo)."""
    path = Path(name)
    if path.suffix == ".toml" or path.is_file():
        return path
    for root in (Path.cwd(), REPO_ROOT):
        candidate = root / "slurm" / "profiles" / f"{name}.toml"
        if candidate.is_file():
            return candidate
    known = sorted(p.stem for p in (REPO_ROOT / "slurm" / "profiles").glob("*.toml"))
    raise ConfigError("--profile", str(name), "a profile file or one of " + ", ".join(known))


def load_profile(name: str | Path, overrides: Mapping[str, Any] | None = None) -> SlurmProfile:
    """Read a cluster profile and apply flag overrides; every error names the key."""
    path = profile_path(name)
    if not path.is_file():
        raise ConfigError("--profile", str(name), "an existing profile TOML file")
    data = load_toml(path, "--profile", "profile TOML file")
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    for key in data:
        check(
            key in PROFILE_RULES, f"{path}: {key}", data[key], "one of " + ", ".join(PROFILE_RULES)
        )
    values: dict[str, Any] = {}
    for key, (tp, ok, allowed) in PROFILE_RULES.items():
        where = f"--{key.replace('_', '-')}" if key in overrides else f"{path}: {key}"
        if key not in overrides and key not in data and key not in PROFILE_DEFAULTS:
            raise ConfigError(where, None, f"{allowed} (every profile key is required)")
        value = overrides.get(key, data.get(key, PROFILE_DEFAULTS.get(key)))
        if tp is float:
            good = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            good = isinstance(value, tp) and not isinstance(value, bool)
        check(good and ok(value), where, value, allowed)
        values[key] = value
    profile = SlurmProfile(**values)
    delay_src = "--signal-delay-s" if "signal_delay_s" in overrides else f"{path}: signal_delay_s"
    time_src = "--time-min" if "time_min" in overrides else f"{path}: time_min"
    check(
        profile.signal_delay_s < profile.time_min * 60,
        delay_src,
        profile.signal_delay_s,
        f"fewer seconds than the time limit ({time_src} = {profile.time_min} min)",
    )
    return profile
