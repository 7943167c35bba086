"""The rules of a table where the paper leaves a choice open (plain data: the command line reads
their defaults without loading pandas)."""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.core.errors import ConfigError

SPARSITY_TOLERANCE = 0.25  # percent points, for methods without a goal sparsity (paper)


# Our choice, not the paper's: the smallest round distance (percent points) that places every
# out-of-interval cell the paper prints (the farthest is STR at 75.34% in the 70% ImageNet column).
MAX_PLACEMENT_DISTANCE = 6.0


@dataclass(frozen=True)
class TableRules:
    """The selection and aggregation rules of a table where the paper leaves a choice open.

    ``ddof``: the standard deviation over seeds divides by n - ddof (1: sample std, the default,
    what pandas computes; 0: population std). With fewer than ddof + 1 seeds it is undefined and
    printed as the mean alone.

    Methods whose sparsity is not specifiable (CS, STR, DST) are placed by their configuration's
    mean achieved sparsity: in the goal column whose +-``tolerance`` interval holds it (the
    paper's .25%). For a goal column that no configuration's interval placement reaches, the
    paper's caption uses "the closest one" unless it "is too far away or belongs to another
    column"; our reading of that (a choice, not the paper's stated rule): the configuration of
    the row closest to the goal is placed there unless it lies more than ``max_distance`` percent
    points away, lies within another column's interval, or is closer to another goal column that
    also lacks an in-interval configuration and whose closest configuration it is too.
    ``max_distance = 0`` disables the fallback (strict intervals).
    """

    ddof: int = 1
    tolerance: float = SPARSITY_TOLERANCE
    max_distance: float = MAX_PLACEMENT_DISTANCE

    def __post_init__(self) -> None:
        if self.ddof not in (0, 1):
            raise ConfigError("ddof", self.ddof, "0 (population std) or 1 (sample std)")
        if not self.tolerance >= 0:
            raise ConfigError("tolerance", self.tolerance, "a number of percent points >= 0")
        if not self.max_distance >= 0:
            raise ConfigError("max_distance", self.max_distance, "a number of percent points >= 0")
