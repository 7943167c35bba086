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


def _bytes(n: object) -> str:
    """``12.3 GiB``; ``-`` when not recorded."""
    if not isinstance(n, int | float):
        return "-"
    from benchmark.store.footprint import format_bytes

    return format_bytes(int(n))


def _lm_lines(record: dict[str, Any]) -> list[str]:
    """A causal language model's headline: perplexities (lower is better), the pattern and
    precision, tokens/s, the one-shot seconds and the memory peaks."""
    m = record["metrics"]
    cfg = record.get("config") or {}
    method, model = cfg.get("method", {}), cfg.get("model", {})
    after = (m.get("oneshot") or {}).get("test_after_prune", {}).get("ppl")
    retrained = method.get("retrain", "none") != "none"
    note = f" (right after the prune: {after:.2f})" if after is not None and retrained else ""
    rate = m.get("images_per_s") or 0
    length = cfg.get("data", {}).get("max_length", 0)
    tokens = f"{rate * length:,.0f} (retraining){_step_note(m)}" if rate else "no training"
    where = "offloaded layer by layer" if m.get("offloaded") else "whole on the device"
    pattern = method.get("pattern")
    lines = [
        f"  test PPL        {m['test']['ppl']:.2f}{note} (lower is better)",
        f"  val PPL         {m['val']['ppl']:.2f}",
        f"  sparsity        {m['sparsity']:.4f} (prunable), {m['sparsity_total']:.4f} (all)"
        + (f"; pattern {pattern}" if pattern else ""),
        f"  speedup         {m['speedup']:.2f}x (corrected {m['speedup_corrected']:.2f}x)",
        f"  tokens/s        {tokens}",
        f"  model           {model.get('dtype', 'float32')}, {where}; peak memory: device "
        f"{_device_peak(record)}, host {_bytes(m.get('peak_host_memory_bytes'))}",
    ]
    if "setup_seconds" in m:
        lines.append(
            f"  one-shot        {m['setup_seconds']:.1f} s before training (loading, prune, "
            "evaluation)"
        )
    return lines


def _device_peak(record: dict[str, Any]) -> str:
    """A language-model run's peak device memory, or why it has none: a CPU run has no device
    memory apart from the host's; a CUDA run packed with others shares the device's counter."""
    peak = record["metrics"].get("peak_memory_bytes")
    if peak:
        return _bytes(peak)
    device = str(record.get("environment", {}).get("device", ""))
    if device.startswith("cuda"):
        return "not measured (runs packed in one process share the device's counter)"
    return f"none (ran on {device or 'the host'}: the host's peak is the run's)"


def format_summary(record: dict[str, Any]) -> str:
    """A few lines describing a finished run."""
    m = record["metrics"]
    if "ppl" in m.get("test", {}):
        head = [f"run {record['run_id']} ({record['method']}): {record['status']}"]
        return "\n".join(head + _lm_lines(record) + settings_lines(record))
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
    if method.get("retrain") == "none":  # a one-shot language-model run trains nothing
        budget_text = "none (one-shot prune, no retraining)"
    if cfg.get("finetune", {}).get("epochs"):
        budget_text += f", then {cfg['finetune']['epochs']} fine-tuning epochs"
    wall = (record.get("metrics") or {}).get("wall_seconds")
    ran = "resumed from its checkpoint" if record.get("resumed") else "from the start"
    if wall is not None:
        ran += f", {wall:.1f} s of training wall-clock"
    setup = (record.get("metrics") or {}).get("setup_seconds")
    if wall is not None and setup is not None:
        ran += f" ({setup + wall:.1f} s with loading, the one-shot prune and evaluations)"
    settings = ", ".join(f"{k}={v}" for k, v in method.items() if v is not None)
    pretrained = f" ({model['pretrained']})" if model.get("pretrained") else ""
    return [
        f"  method          {name}: {settings}",
        f"  data, model     {data.get('name')} (batch {data.get('batch_size')}), "
        f"{model.get('name')}{pretrained}; seed {cfg.get('seed', 0)}",
        f"  budget          {budget_text}",
        f"  ran             {ran}",
    ]
