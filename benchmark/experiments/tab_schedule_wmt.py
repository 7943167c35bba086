"""T5-small on WMT16 (EN-DE), One Shot IMP: the translation schemes (test BLEU)."""

from benchmark.experiments.problems import T5_SMOKE, T5_WMT16
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable, task_smoke_grid

# Budgets in % of the 5 training passes: 0.1, 0.25, 0.5, 1, 2 and 3 passes.
SPEC = ScheduleTable(
    "appendix-schedule-comparison-wmt-t5",
    "T5-small/WMT16 One Shot IMP: retraining schedules (BLEU)",
    smoke=task_smoke_grid(T5_SMOKE, "bleu"),
    paper=ScheduleGrid(
        T5_WMT16, (50, 60, 70), ("2%", "5%", "10%", "20%", "40%", "60%"), metric="bleu"
    ),
)
