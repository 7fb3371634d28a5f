"""A database that cannot be written here (an immutable file, a read-only mount) is opened for
reading: ``threads``, ``history`` and ``export`` work on it, and a write says why it cannot."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aworld_graph import Agent, Runners
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main
from aworld_graph.errors import ConfigError
from aworld_graph.testing import ScriptedModel


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    db = tmp_path / "store" / "runs.db"
    with TrajectorySaver(db) as saver:
        agent = Agent(name="a", model=ScriptedModel(["four"]))
        Runners.sync_run("2+2?", agent=agent, task_id="t1", checkpointer=saver)
    assert not Path(f"{db}-wal").exists()  # closed cleanly: everything is in the file
    return db


@pytest.fixture
def immutable(stored: Path) -> Iterator[Path]:
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", stored]).returncode:
        pytest.skip("chattr +i is not available here (needs root on a filesystem that has it)")
    try:
        yield stored
    finally:
        subprocess.run(["chattr", "-i", stored], check=True)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_reading_commands_work_on_an_immutable_file(immutable: Path, tmp_path: Path) -> None:
    code, out = _cli("threads", "--db", str(immutable))
    assert code == 0 and out.splitlines()[1].split()[0] == "t1", out
    code, out = _cli("history", "t1", "--db", str(immutable))
    assert code == 0 and "●" in out, out
    target = tmp_path / "out.jsonl"
    code, out = _cli("export", "-f", "openai", "-o", str(target), "--db", str(immutable))
    assert code == 0, out
    (row,) = [json.loads(line) for line in target.read_text().splitlines()]
    assert row["messages"][-1]["content"] == "four"


def test_a_write_to_an_immutable_file_names_the_file_and_the_way_out(immutable: Path) -> None:
    code, out = _cli("prune", "--keep", "1", "--db", str(immutable))
    assert code != 0 and "Traceback" not in out
    assert str(immutable) in out and "read-only" in out and "--db" in out
    with TrajectorySaver(immutable) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is not None
        agent = Agent(name="a", model=ScriptedModel(["five"]))
        with pytest.raises(ConfigError, match="read-only"):
            Runners.sync_run("2+3?", agent=agent, task_id="t2", checkpointer=saver)


def test_reading_commands_work_on_a_read_only_mount(stored: Path) -> None:
    """The store's folder bind-mounted read-only in a private mount namespace (so even root
    cannot write it): ``threads`` lists the run; a write (``prune``, which would also make
    the lock file beside the store) says the store is read-only."""
    folder = stored.parent
    cli = f"{sys.executable} -c 'from aworld_graph.cli import main; main()'"
    script = (
        f"mount --bind -o ro {folder} {folder} && {cli} threads --db {stored} && "
        f"! {cli} prune --keep 1 --db {stored} 2>&1"
    )
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    if "mount" in done.stderr and done.returncode and "t1" not in done.stdout:
        pytest.skip(f"cannot make a private read-only mount here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[0] == "t1"
    assert "is read-only here" in done.stdout and "Traceback" not in done.stdout, done.stdout


def test_a_file_made_by_another_connection_meanwhile_is_not_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent first writes to a new file: one connection creates it while another
    checks whether it is writable (seen with 16 runs at once on a fresh store)."""
    from aworld_graph.checkpoint import _db

    path = tmp_path / "new.db"
    real_access = os.access

    def access(target: Any, mode: int) -> bool:
        answer = real_access(target, mode)  # the file is not there yet: False
        path.touch()  # ... and another thread creates it now
        return answer

    monkeypatch.setattr(_db.os, "access", access)
    assert _db.SqliteDatabase(path, "normal").read_only is False
