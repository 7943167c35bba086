"""Measured throughput per device, kept in the store: ``<store>/calibration/throughput.json``.

``prunebench calibrate`` times a short run of each model on a device and records here, per
(model, dataset, precision, device), the training images per second and the peak device memory.
Cost estimates read it when the store holds no finished run of that kind (a finished run's own
measurement comes first). Its entries name the command that wrote them, so an estimate can say
where its figure came from. Read without torch or pandas.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from benchmark.core.errors import CorruptFileError
from benchmark.core.files import make_dirs, read_regular, write_json_atomic
from benchmark.store.records import MAX_RECORD_BYTES

CALIBRATION_DIR = "calibration"
CALIBRATION_FILE = "throughput.json"
VERSION = 1


@dataclass(frozen=True)
class Calibration:
    """One measurement: a model's training throughput on one device and precision."""

    model: str
    dataset: str
    precision: str  # "fp32" or "bf16"
    device: str  # a device label: "cpu" or "cuda (NVIDIA H200)"
    images_per_s: float
    batch_size: int
    timed_iterations: int
    peak_memory_bytes: int | None = None
    measured: str = ""  # ISO time of the measurement
    torch: str = ""
    command: str = ""
    # Runs trained as one array model (benchmark.training.array); images_per_s is of all of them.
    array: int = 1
    # The array's layout (benchmark.training.array.stack.LAYOUTS; "" for a single run).
    layout: str = ""
    threads: int = 0  # torch threads it ran with (0: not recorded, files before issue 35)
    # images/s of each repeated timing; images_per_s is their median
    timings: tuple[float, ...] = ()

    def spread(self) -> str:
        """E.g. ``median of 3 timings, 50-92 images/s``; "" for a single timing."""
        if len(self.timings) < 2:
            return ""
        low, high = min(self.timings), max(self.timings)
        return f"median of {len(self.timings)} timings, {low:,.0f}-{high:,.0f} images/s"

    @property
    def key(self) -> tuple[str, str, str, str, int, str]:
        """(model, dataset, precision, device, array size, layout): what a later measurement of
        the same replaces."""
        return (self.model, self.dataset, self.precision, self.device, self.array, self.layout)


def calibration_path(store: str | Path) -> Path:
    """Where the calibration file of the store in ``store`` lives."""
    return Path(store) / CALIBRATION_DIR / CALIBRATION_FILE


def read_calibrations(store: str | Path) -> list[Calibration]:
    """Every measurement in the store's calibration file (none when there is no file)."""
    path = calibration_path(store)
    try:
        data = json.loads(read_regular(path, MAX_RECORD_BYTES))
    except FileNotFoundError:
        return []
    except CorruptFileError as err:
        raise CorruptFileError(path, f"{err.reason}; {_AGAIN}") from None
    except (OSError, ValueError) as err:
        raise CorruptFileError(path, f"unreadable ({err}); {_AGAIN}") from None
    names = {f.name for f in fields(Calibration)}
    try:
        return [_entry({k: v for k, v in e.items() if k in names}) for e in data["entries"]]
    except (KeyError, TypeError, AttributeError) as err:
        raise CorruptFileError(path, f"not a calibration file ({err!r}); {_AGAIN}") from None


_AGAIN = "delete it and measure again with prunebench calibrate"


def _entry(fields_: dict[str, Any]) -> Calibration:
    """A calibration from its JSON fields (a JSON list of timings back to a tuple)."""
    fields_["timings"] = tuple(fields_.get("timings") or ())
    return Calibration(**fields_)


def write_calibrations(store: str | Path, new: list[Calibration]) -> Path:
    """Add ``new`` to the store's calibration file, replacing earlier measurements of the same
    (model, dataset, precision, device, array size, layout); returns the file's path."""
    path = calibration_path(store)
    make_dirs(path.parent)
    kept = {c.key: c for c in read_calibrations(store)}
    kept.update({c.key: c for c in new})
    entries: list[dict[str, Any]] = [asdict(c) for c in kept.values()]
    write_json_atomic(path, {"version": VERSION, "entries": entries})
    return path
