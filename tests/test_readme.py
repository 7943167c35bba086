"""The README's examples stay true (its two commands, .ci/run, its Quickstart, its plugin) and its
order serves a newcomer: at most 300 lines, a figure with its caption, the user jobs within the
first 150 lines, each with its commands and a link to its reference page, a table of contents
whose links resolve, a citation and a license. Every page's lines, links and names:
tests/test_docs.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from docs_text import anchor as _anchor
from docs_text import anchors, blocks, links, prose_lines, section

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return blocks(README, lang)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second() -> None:
    setup = [b for b in _blocks("bash") if "python3 -m venv" in b]
    assert len(setup) == 1
    commands = [line for line in setup[0].splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("prunebench demo")
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == commands[1]


def test_the_quickstart_shows_the_result_its_first_run_stores() -> None:
    from benchmark.training.validation import load_config

    quickstart = README.split("## Quickstart", 1)[1].split("```", 2)[1]
    (shown,) = re.findall(r"prunebench show (\S+)", quickstart)
    assert "prunebench run  " in quickstart  # the first command: the default config, as is
    assert shown == load_config().run_id


# --- A newcomer's README: user paths first, a table of contents, names that exist ------------

USER_PATHS = (
    "## Reproduce a table and plot its figure",
    "## Quickstart",
    "## What a table costs before a cluster",
    "## Run a grid on a SLURM cluster",
    "## Add a method",
    "## Draw an envelope figure",
    "## Language models",
)


def _prose_lines(text: str = README) -> list[tuple[int, str]]:
    return prose_lines(text)


def _anchors(text: str = README) -> set[str]:
    return anchors(text)


def _section(heading: str, text: str = README) -> str:
    return section(text, heading)


def test_the_readme_is_short_and_opens_with_a_figure_and_its_caption() -> None:
    assert len(README.splitlines()) <= 300
    head = README.split("\n## ", 1)[0]
    (figure,) = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", head)
    assert (ROOT / figure).is_file()
    assert (ROOT / figure).with_suffix(".txt").is_file(), "the figure's full text lies beside it"
    caption = head.split(figure + ")", 1)[1].strip().split("\n\n", 1)[0]
    assert caption.startswith("*") and caption.endswith("*"), "an italic caption under the figure"
    assert "prunebench plot" in caption


def test_the_readme_cites_the_paper_and_names_its_license() -> None:
    citation = _section("## Citation")
    for word in ("Zimmer", "Spiegel", "Pokutta", "Love Retraining", "2023", "ICLR"):
        assert word in citation
    assert "MIT" in _section("## License")
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"]["text"] == "MIT"


def test_the_user_paths_come_first_each_with_its_commands_and_reference_page() -> None:
    lines = {line: number for number, line in _prose_lines()}
    contents = lines["## Contents"]
    starts = {heading: lines.get(heading) for heading in USER_PATHS}
    assert None not in starts.values(), f"a user path heading is missing: {starts}"
    assert starts[USER_PATHS[0]] > contents, "the table of contents comes before the user paths"
    assert starts[USER_PATHS[0]] <= 100, "the first user path starts within 100 lines"
    late = [heading for heading, number in starts.items() if number > lines["## Reference"]]
    assert not late, f"user paths come before the reference, citation and license: {late}"
    for heading in USER_PATHS:  # each path shows its commands and links to its reference page
        assert "```bash\n" in _section(heading), f"{heading} shows no commands"
        pages = [link for link in links(_section(heading)) if ".md" in link]
        assert pages, f"{heading} links to no reference page"


def test_the_table_of_contents_links_resolve_to_headings() -> None:
    anchors = _anchors()
    contents = _section("## Contents")
    links = re.findall(r"\]\(#([^)\s]+)\)", contents)
    assert len(links) >= len(USER_PATHS)
    assert not [link for link in links if link not in anchors], "broken table-of-contents links"
    sections = [line[3:] for _, line in _prose_lines() if line.startswith("## ")]
    after = sections[sections.index("Contents") + 1 :]
    unlisted = [s for s in after if _anchor(s) not in links]
    assert not unlisted, f"sections the table of contents leaves out: {unlisted}"
    # every other link to a heading in the README resolves too
    broken = [link for link in re.findall(r"\]\(#([^)\s]+)\)", README) if link not in anchors]
    assert not broken, f"links to headings that do not exist: {broken}"


def _plugin() -> tuple[dict, str, str, str]:
    """The README's plugin: its pyproject.toml, its folder, its module's file and source."""
    (project,) = [b for b in _blocks("toml") if "prunebench.methods" in b]
    (source,) = [b for b in _blocks("python") if "register_method" in b]
    folder = re.match(r"# (\S+)/pyproject\.toml\n", project)
    module_file = re.match(r"# (\S+\.py)\n", source)
    assert folder and module_file, "the plugin's blocks say which file of the plugin they are"
    return tomllib.loads(project), folder.group(1), module_file.group(1), source


def test_the_plugin_pyproject_installs_as_written() -> None:
    project, folder, module_file, source = _plugin()
    assert project["project"]["name"] and project["project"]["version"]
    assert project["build-system"]["build-backend"]
    (entry,) = project["project"]["entry-points"]["prunebench.methods"].items()
    (method,) = re.findall(r'^\s+name = "([^"]+)"', source, re.M)
    assert entry[0] == method
    assert module_file.startswith(f"{folder}/")
    module = module_file[len(folder) + 1 : -len(".py")]
    assert entry[1] == module.replace("/", ".")
    package = module.rsplit("/", 1)[0]
    assert f"{package}/__init__.py" in _section("## Add a method")
    # installed into the environment of the two commands, from the folder the blocks name
    commands = "\n".join(_blocks("bash"))
    assert f".venv/bin/pip install -e ./{folder}\n" in commands
    assert "same environment" in _section("## Add a method")


def test_the_plugin_builds_into_a_wheel_with_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zipfile

    from setuptools import build_meta

    project, folder, module_file, source = _plugin()
    root = tmp_path / folder
    (root / module_file[len(folder) + 1 :]).parent.mkdir(parents=True)
    (root / module_file[len(folder) + 1 :]).write_text(source)
    (root / module_file[len(folder) + 1 :]).with_name("__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        [b for b in _blocks("toml") if "prunebench.methods" in b][0]
    )
    monkeypatch.chdir(root)
    wheel = build_meta.build_wheel(str(tmp_path / "dist"))
    with zipfile.ZipFile(tmp_path / "dist" / wheel) as whl:
        names = whl.namelist()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "[prunebench.methods]" in whl.read(entry_points).decode()
    assert module_file[len(folder) + 1 :] in names
