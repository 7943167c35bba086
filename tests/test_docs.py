"""Every page of the documentation stays readable and true: lines of at most 100 characters, no
issue numbers or development history outside the changelog, links that resolve, only modules and
paths the tree holds, no command that needs sudo as root, a complete config that validates, a
criterion example that runs, and one table of measured GPU rates that other pages cite."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
import torch
from docs_text import CHANGELOG, PAGES, RATES_PAGE, ROOT, anchors, blocks, links, page, section

USER_PAGES = [p for p in PAGES if p != CHANGELOG]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_line_of_the_documentation_fits_100_columns() -> None:
    wide = [
        f"{_name(p)}:{number} ({len(line)})"
        for p in PAGES
        for number, line in enumerate(page(p).splitlines(), start=1)
        if len(line) > 100
    ]
    assert not wide, f"lines wider than 100 characters: {wide}"


def test_user_documents_hold_no_issue_numbers_or_development_history() -> None:
    history = re.compile(r"\bissues? \d+|\(#\d+\)|before -> now|rerun pending|pending on a GPU")
    found = [
        f"{_name(p)}:{number}: {line.strip()}"
        for p in USER_PAGES
        for number, line in enumerate(page(p).splitlines(), start=1)
        if history.search(line.lower())
    ]
    assert not found, f"history belongs in benchmark/CHANGELOG.md: {found}"


def test_every_link_of_the_documentation_resolves() -> None:
    broken = []
    for source in PAGES:
        for target in links(page(source)):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, fragment = target.partition("#")
            file = (source.parent / path).resolve() if path else source
            if not file.exists():
                broken.append(f"{_name(source)}: {target} (no such file)")
            elif fragment and file.suffix == ".md" and fragment not in anchors(page(file)):
                broken.append(f"{_name(source)}: {target} (no such heading)")
    assert not broken, f"broken links: {broken}"


def test_every_reference_page_is_in_the_index() -> None:
    index = ROOT / "benchmark" / "README.md"
    listed = {(index.parent / link).resolve() for link in links(page(index))}
    missing = [_name(p) for p in PAGES if p not in listed and p not in (index, ROOT / "README.md")]
    assert not missing, f"reference pages the index leaves out: {missing}"


def test_every_module_and_path_the_documentation_names_exists() -> None:
    text = "\n".join(page(p) for p in PAGES)
    modules = set(re.findall(r"python\s+-m\s+(benchmark(?:\.\w+)*)", text))
    assert "benchmark.bench" in modules
    missing = []
    for name in sorted(modules):
        spec = importlib.util.find_spec(name)
        runnable = spec is not None and (
            spec.submodule_search_locations is None
            or importlib.util.find_spec(f"{name}.__main__") is not None
        )
        if not runnable:
            missing.append(f"python -m {name}")
    paths = set(re.findall(r"(?<![\w./-])((?:benchmark|methods|tests|slurm)/[\w./*-]*)", text))
    assert "benchmark/gpu_checks.sh" in paths
    for path in sorted(paths):
        path = path.rstrip(".")
        if "*" in path or re.search(r"/[A-Z_]+(\.\w+)?$", path):  # a pattern or NAME.toml
            continue
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"the documentation names what the tree lacks: {missing}"


def test_no_documented_command_needs_sudo_unconditionally() -> None:
    commands = []
    for p in PAGES:
        for lang, body in re.findall(r"```(\w*)\n(.*?)```", page(p), flags=re.S):
            for line in body.splitlines():
                if lang in ("bash", "sh", "shell"):
                    commands.append(line)
                elif lang in ("", "console") and line.startswith("$ "):
                    commands.append(line[2:])
    unconditional = []
    for line in commands:
        command = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        if re.search(r"(?:^|[\s;&|(])sudo\s", command) and not re.search(r"id -u|EUID", command):
            unconditional.append(line.strip())
    assert not unconditional, f"commands that fail as root without sudo: {unconditional}"


def test_the_complete_config_of_the_configuration_page_is_valid() -> None:
    from benchmark.config.parse import config_from_dict
    from benchmark.training.validation import validate

    text = page(ROOT / "benchmark" / "config" / "README.md")
    (example,) = [b for b in blocks(text, "toml") if "[runtime]" in b]
    cfg = config_from_dict(tomllib.loads(example))
    validate(cfg)
    assert cfg.model.name == "resnet56" and cfg.method.name == "bimp"
    assert cfg.budget.initial_epochs == 150


def test_the_criterion_example_of_the_methods_page_registers_and_prunes_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmark.pruning import CRITERIA, compute_masks

    # The example registers into a copy of the registry, gone after the test.
    monkeypatch.setattr(CRITERIA, "_items", dict(CRITERIA._items))
    (source,) = [b for b in blocks(page(ROOT / "methods" / "README.md"), "python")]
    namespace: dict = {}
    exec(compile(source, "methods/README.md", "exec"), namespace)
    (name,) = re.findall(r'CRITERIA\.register\("([^"]+)"\)', source)
    torch.manual_seed(0)
    params = [
        ("a", torch.nn.Parameter(torch.randn(8, 6))),
        ("b", torch.nn.Parameter(torch.randn(5))),
    ]
    first = compute_masks(name, params, 0.6, generator=torch.Generator().manual_seed(1))
    again = compute_masks(name, params, 0.6, generator=torch.Generator().manual_seed(1))
    kept = sum(int(m.sum()) for m in first)
    assert kept == 53 - round(0.6 * 53)
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))
    magnitude = compute_masks("global", params, 0.6)
    assert all(torch.equal(x, y) for x, y in zip(first, magnitude, strict=True))


# --- One source per GPU figure: the rates table ------------------------------------------------


def _rates() -> tuple[dict[str, str], list[list[str]]]:
    """The rates table's calls (letter -> description) and rows (cells)."""
    text = section(page(RATES_PAGE), "## Measured GPU rates")
    calls = dict(re.findall(r"^- \*\*([A-Z])\*\*: (.*?)(?=^- \*\*|^\s*$)", text, re.M | re.S))
    header = "| row | workload | fp32 | bf16 | call |"
    assert header in text
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    return calls, rows


def test_the_rates_table_names_card_torch_date_command_and_load_of_every_call() -> None:
    calls, rows = _rates()
    assert rows and calls
    for letter, text in calls.items():
        text = " ".join(text.split())
        assert re.search(r"\d{4}-\d{2}-\d{2}", text), f"call {letter}: no date"
        assert re.search(r"H100|H200|A100", text), f"call {letter}: no card"
        assert "torch" in text, f"call {letter}: no torch version (or 'not recorded')"
        assert "`" in text, f"call {letter}: no command"
        assert re.search(r"alone|load", text), f"call {letter}: idle or not?"
    for number, row in enumerate(rows, start=1):
        assert row[0] == str(number) and row[-1] in calls, f"row {row}"


def test_gpu_rates_on_other_pages_are_rows_of_the_rates_table() -> None:
    _, rows = _rates()
    measured = set(re.findall(r"\d{1,3}(?:,\d{3})+", " ".join(" ".join(r[2:4]) for r in rows)))
    stray = []
    for p in USER_PAGES:
        if p == RATES_PAGE:
            continue
        for paragraph in page(p).split("\n\n"):
            if not re.search(r"H200|H100|A100|NVIDIA", paragraph):
                continue
            for figure in re.findall(r"(\d{1,3}(?:,\d{3})+) images/s", paragraph):
                if figure not in measured:
                    stray.append(f"{_name(p)}: {figure} images/s")
    assert not stray, f"GPU rates that the rates table lacks (add the row, cite it): {stray}"
