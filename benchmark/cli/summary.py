"""What ``prunebench run`` and ``show`` print of a finished run: its metrics, how its steps ran,
and what the run was (method settings, data and model, budget, whether it resumed).
"""

from __future__ import annotations

from typing import Any

from benchmark.core.errors import ConfigError


def _step_note(metrics: dict) -> str:
    """How the training steps ran, after the images/s figure (older results say nothing)."""
    step = metrics.get("step")
    if not step:
        return ""
    if step.get("mode") == "cuda_graphs":
        untimed = f"{metrics.get('compile_seconds', 0.0):.1f} s capturing"
        warmup = metrics.get("warmup_seconds", 0.0)
        if warmup >= 0.05:
            untimed += f", {warmup:.1f} s on new batch shapes (kernel autotuning)"
        return f" (CUDA graphs; {untimed}, not counted)"
    return f" (eager: {step['why_eager']})" if step.get("why_eager") else ""


def _images_per_s(metrics: dict) -> str:
    """The images/s figure and how it was measured; none when no iteration was timed."""
    if metrics["images_per_s"] > 0:
        return f"{metrics['images_per_s']:.0f}" + _step_note(metrics)
    # Each epoch's first iterations are left out of the timing (TIMING_WARMUP_ITERS).
    return "not measured (no epoch had more iterations than its untimed first ones)"


def format_summary(record: dict[str, Any]) -> str:
    """A few lines describing a finished run."""
    m = record["metrics"]
    lines = [
        f"run {record['run_id']} ({record['method']}): {record['status']}",
        f"  test top-1      {m['test']['top1']:.4f}"
        + (f"   top-5 {m['test']['top5']:.4f}" if "top5" in m["test"] else ""),
        f"  val top-1       {m['val']['top1']:.4f}",
        *(f"  test {k:<11}{m['test'][k]:.4f}" for k in ("miou", "bleu") if k in m["test"]),
        f"  sparsity        {m['sparsity']:.4f} (prunable), {m['sparsity_total']:.4f} (all)",
        f"  speedup         {m['speedup']:.2f}x (corrected {m['speedup_corrected']:.2f}x)",
        f"  images/s        {_images_per_s(m)}",
    ]
    if "stability" in m:
        s = m["stability"]
        lines.append(
            f"  pruning stab.   {s['pruning_stability']:.4f} (test top-1 {s['acc_before']:.4f} "
            f"before the final prune, {s['acc_after']:.4f} after; 1 - drop/before, 1: no drop)"
        )
    return "\n".join(lines + settings_lines(record))


def _budget_fields(method: str | None) -> frozenset[str]:
    """The budget fields ``method`` reads (all of them for a method no longer registered)."""
    from benchmark.config.method_registry import get_method

    try:
        return get_method(method or "").budget_fields
    except ConfigError:
        return frozenset({"epochs", "initial_epochs", "cycles"})


def settings_lines(record: dict[str, Any]) -> list[str]:
    """What the run was: its method settings, data and model, budget, and how it ran."""
    cfg = record.get("config") or {}
    if not cfg:
        return []
    method = dict(cfg.get("method", {}))
    name = method.pop("name", record.get("method"))
    data, model, budget = cfg.get("data", {}), cfg.get("model", {}), cfg.get("budget", {})
    budget_text = ", ".join(f"{k} {v}" for k, v in budget.items() if k in _budget_fields(name))
    if cfg.get("finetune", {}).get("epochs"):
        budget_text += f", then {cfg['finetune']['epochs']} fine-tuning epochs"
    wall = (record.get("metrics") or {}).get("wall_seconds")
    ran = "resumed from its checkpoint" if record.get("resumed") else "from the start"
    if wall is not None:
        ran += f", {wall:.1f} s of training wall-clock"
    settings = ", ".join(f"{k}={v}" for k, v in method.items() if v is not None)
    return [
        f"  method          {name}: {settings}",
        f"  data, model     {data.get('name')} (batch {data.get('batch_size')}), "
        f"{model.get('name')}; seed {cfg.get('seed', 0)}",
        f"  budget          {budget_text}",
        f"  ran             {ran}",
    ]
