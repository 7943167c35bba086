"""How a grid is executed: the executor, workers, threads and the cluster profile."""

from __future__ import annotations

import os
from dataclasses import dataclass

from benchmark.config.run import check
from benchmark.launch.profiles import SlurmProfile

EXECUTORS = ("slurm", "local", "debug")


@dataclass
class LaunchSettings:
    """How a grid is executed."""

    executor: str = "local"
    workers: int = 1  # local: parallel worker processes
    runs_per_task: int = 1  # slurm: runs packed into one array task
    # Runs a job trains at once on its device, in one process (benchmark.training.packing).
    runs_per_gpu: int = 1
    # Compatible runs a job trains as one array model (benchmark.training.array).
    array: int = 1
    # Their forward's layout (benchmark.training.array.stack.LAYOUTS; None: the device's
    # default). Not part of any run id: the layouts agree to float noise.
    array_layout: str | None = None
    threads: int = 0  # --threads: every run's torch threads (0: see run_threads)
    profile: SlurmProfile | None = None
    local_time_min: float = 0.0  # local: a time limit per worker (0: none)
    local_signal_delay_s: int = 30
    max_requeues: int = 3  # submitit's max_num_timeout
    hold: bool = False  # submit SLURM jobs held (benchmarks of the submission itself)
    python: str | None = None  # the interpreter jobs run (default: this one)

    def validate(self) -> None:
        """Raise ConfigError naming the flag of a bad setting."""
        check(self.executor in EXECUTORS, "--executor", self.executor, EXECUTORS)
        check(self.workers >= 1, "--workers", self.workers, "an integer >= 1")
        check(self.runs_per_task >= 1, "--runs-per-task", self.runs_per_task, "an integer >= 1")
        check(self.runs_per_gpu >= 1, "--runs-per-gpu", self.runs_per_gpu, "an integer >= 1")
        check(self.array >= 1, "--array", self.array, "an integer >= 1")
        if self.array_layout is not None:  # (torch only then: status queries stay light)
            from benchmark.training.array.fit import check_layout

            check_layout(self.array_layout, self.array)
        check(self.threads >= 0, "--threads", self.threads, "an integer >= 0 (0: derived)")
        check(self.max_requeues >= 0, "--max-requeues", self.max_requeues, "an integer >= 0")
        check(self.local_time_min >= 0, "--time-min", self.local_time_min, "minutes >= 0")
        if self.executor == "slurm":
            check(self.profile is not None, "--profile", None, "a cluster profile for slurm")

    def task_runs(self) -> int:
        """Runs per SLURM array task: at least the runs a job trains at once (packed or as
        one array model)."""
        return max(self.runs_per_task, self.runs_per_gpu, self.array)

    def run_threads(self, configured: int = 0) -> int:
        """Torch threads of a run whose config says ``runtime.threads = configured``.

        One rule everywhere: ``--threads`` (this setting) wins, then the config's own non-zero
        value, then the executor's default (slurm: the profile's cpus_per_task; local: the
        run's share of the cores; debug: 0, torch's default).
        """
        if self.threads:
            return self.threads
        if configured:
            return configured
        if self.executor == "slurm":
            assert self.profile is not None
            return self.profile.cpus_per_task
        if self.executor == "local":
            # Oversubscribing the cores slows every worker down more than it gains.
            return max(1, available_cores() // self.workers)
        return 0


def available_cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
