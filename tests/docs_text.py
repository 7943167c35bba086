"""The user documentation as text: its pages, their code blocks, prose lines and headings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Every page of the documentation: the README and the reference pages next to the code.
PAGES = (
    README,
    ROOT / "benchmark" / "README.md",
    ROOT / "benchmark" / "CHANGELOG.md",
    ROOT / "benchmark" / "config" / "README.md",
    ROOT / "benchmark" / "experiments" / "README.md",
    ROOT / "benchmark" / "experiments" / "paper" / "README.md",
    ROOT / "benchmark" / "reporting" / "README.md",
    ROOT / "benchmark" / "tasks" / "README.md",
    ROOT / "benchmark" / "bench" / "README.md",
    ROOT / "benchmark" / "cli" / "README.md",
    ROOT / "methods" / "README.md",
    ROOT / "slurm" / "README.md",
    ROOT / "results" / "README.md",
)
RATES_PAGE = ROOT / "benchmark" / "bench" / "README.md"
CHANGELOG = ROOT / "benchmark" / "CHANGELOG.md"


def page(path: Path) -> str:
    """The text of one page."""
    return path.read_text(encoding="utf-8")


def blocks(text: str, lang: str) -> list[str]:
    """The fenced code blocks of ``text`` in language ``lang`` (their bodies)."""
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of every heading of ``text`` (repeated headings get -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(text):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = anchor(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def section(text: str, heading: str) -> str:
    """The text of ``heading``'s section, up to the next heading of the same or a higher level
    (headings inside code blocks, such as a ``# comment``, do not count)."""
    level = len(heading.split(" ", 1)[0])
    lines = text.splitlines(keepends=True)
    numbers = {number: line for number, line in prose_lines(text)}
    start = next(n for n, line in numbers.items() if line == heading)
    end = len(lines) + 1
    for number, line in numbers.items():
        match = re.match(r"(#{1,6}) ", line)
        if number > start and match and len(match.group(1)) <= level:
            end = number
            break
    return "".join(lines[start - 1 : end - 1])


def links(text: str) -> list[str]:
    """The targets of every Markdown link in ``text`` (a link may wrap over lines)."""
    return re.findall(r"\]\(([^)\s]+)\)", text)
