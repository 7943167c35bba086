"""Stores a group shares: a root folder the group may write keeps every folder made in it
writable by the group whatever the writer's umask, and a write the filesystem refuses
(permission, a read-only filesystem, a full disk) is one line naming the file and the fix."""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

import pytest
import torch
from reporting.test_keep import fake_result, smoke_runs
from store.test_file_modes import (  # noqa: F401 (shared_folder: a fixture)
    as_nobody,
    shared_folder,
    umask,
    write_store,
)

from benchmark.cli import main
from benchmark.cli.app import COMMANDS
from benchmark.store.results import Store

SPEC = "appendix-cifar10-results"


def folders(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")
            if p.is_dir()}  # fmt: skip


def test_a_group_store_stays_writable_by_the_group_under_umask_022(
    shared_folder: Path,  # noqa: F811
) -> None:
    nogroup = pwd.getpwnam("nobody").pw_gid if os.geteuid() == 0 else os.getgid()
    root = shared_folder / "runs"
    root.mkdir()
    os.chown(root, -1, nogroup)
    root.chmod(0o2775)  # the group's store: group-writable, new files in the group
    with umask(0o022):
        write_store(root)
    made = folders(root)
    assert {".locks", "weights", "checkpoints", "archive", "grids"} <= set(made)
    assert all(mode & 0o070 == 0o070 for mode in made.values()), made

    def rerun() -> int:  # a colleague (another user in the group) forces a rerun
        store = Store(root)
        store.write_result({"run_id": "a", "status": "finished", "n": 3}, {"w": torch.ones(2)},
                           force=True)  # fmt: skip
        with store.lock("run-a"):
            pass
        return 0 if store.read("a") == {"run_id": "a", "status": "finished", "n": 3} else 1

    code, said = as_nobody(rerun)
    assert code == 0, said


def test_a_folder_the_user_cannot_write_is_one_line_naming_it_and_the_fix(
    shared_folder: Path,  # noqa: F811
) -> None:
    root = shared_folder / "runs"
    with umask(0o022):  # a colleague's store, made under umask 022: folders rwxr-xr-x
        for run in smoke_runs(root, SPEC):  # CS, STR and DST at 50%: no cell selects them
            if not Store(root).is_finished(run.cfg.run_id):
                fake_result(root, run.cfg, 0.5, sparsity=0.5 if run.sparsity is None else None)
        write_store(root)
    root.chmod(0o777)  # its top folder writable by all, its .locks not
    free = ["free", SPEC, "--store", str(root), "--scale", "smoke"]
    # First as root, a dry run (it writes nothing): the child imports nothing itself then (the
    # interpreter's own files may be out of user nobody's reach).
    assert main([*free, "--dry-run"]) == 0
    code, said = as_nobody(lambda: main(free))
    assert code == 1, said
    lines = [line for line in said.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in said, said
    (line,) = lines
    assert line.startswith(f"prunebench: cannot write {root / '.locks'}"), line
    assert "permission denied" in line and f"chmod -R g+w {root}" in line, line
    assert "umask 002" in line


@pytest.mark.parametrize(
    ("code", "words"),
    [(errno.ENOSPC, "no space is left"), (errno.EROFS, "read-only"), (errno.EDQUOT, "quota")],
)
def test_a_full_disk_or_a_read_only_store_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: int, words: str
) -> None:
    path = "/data/runs/weights/.x.pt.1234.tmp"

    def refused(args: object) -> int:
        raise OSError(code, os.strerror(code), path)

    monkeypatch.setitem(COMMANDS, "list", refused)
    assert main(["list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"prunebench: cannot write {path}: ")
    assert words in err
    from benchmark.store.errors import storage_error

    assert storage_error(OSError(errno.ENOENT, "missing", path)) is None  # others: re-raised
