"""The README's examples stay true (its two commands, .ci/run, its complete TOML config, its
plugin) and its order serves a newcomer: the user paths within the first 150 lines, a table of
contents whose links resolve, only names the tree holds, and no command that needs sudo as root."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from benchmark.config.parse import config_from_dict
from benchmark.training.validation import validate

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second() -> None:
    setup = [b for b in _blocks("bash") if "python3 -m venv" in b]
    assert len(setup) == 1
    commands = [line for line in setup[0].splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("prunebench demo")
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == commands[1]


def test_readme_complete_config_is_valid() -> None:
    (example,) = [b for b in _blocks("toml") if "[runtime]" in b]
    cfg = config_from_dict(tomllib.loads(example))
    validate(cfg)
    assert cfg.model.name == "resnet56" and cfg.method.name == "bimp"
    assert cfg.budget.initial_epochs == 150


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
    "## Run a grid on a SLURM cluster",
    "## Add a method",
)


def _prose_lines(text: str = README) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(text: str = README) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in _prose_lines(text):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = _anchor(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def _section(heading: str, text: str = README) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_user_paths_start_within_the_first_150_lines() -> None:
    lines = {line: number for number, line in _prose_lines()}
    contents = lines["## Contents"]
    starts = {heading: lines.get(heading) for heading in USER_PATHS}
    assert None not in starts.values(), f"a user path heading is missing: {starts}"
    assert starts[USER_PATHS[0]] > contents, "the table of contents comes before the user paths"
    late = {heading: number for heading, number in starts.items() if number > 150}
    assert not late, f"user paths must start within the README's first 150 lines: {late}"
    for heading in USER_PATHS:  # each path shows its commands
        assert "```bash\n" in _section(heading), f"{heading} shows no commands"


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


def test_every_module_and_path_the_readme_names_exists() -> None:
    import importlib.util

    modules = set(re.findall(r"python\s+-m\s+(benchmark(?:\.\w+)*)", README))
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
    paths = set(re.findall(r"(?<![\w./-])((?:benchmark|methods|tests|slurm)/[\w./*-]*)", README))
    assert "benchmark/gpu_checks.sh" in paths
    for path in sorted(paths):
        path = path.rstrip(".")
        if "*" in path or re.search(r"/[A-Z_]+(\.\w+)?$", path):  # a pattern or NAME.toml
            continue
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"the README names what the tree lacks: {missing}"


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


def test_no_readme_command_needs_sudo_unconditionally() -> None:
    blocks = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)
    commands = []
    for lang, body in blocks:
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
