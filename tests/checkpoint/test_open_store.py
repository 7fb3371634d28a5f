"""``open_store``: the one way to open a store, by path, URL or the environment; and the
database layer (``TrajectorySaver.database``) that tables beside the checkpoints go through."""

from __future__ import annotations

from pathlib import Path

import pytest

from aworld_graph.checkpoint import DB_ENV_VAR, TrajectorySaver, Tx, open_store
from aworld_graph.errors import ConfigError
from tests.checkpoint.conftest import ask, chat_graph


def test_the_environment_names_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV_VAR, str(tmp_path / "custom" / "runs.db"))
    with open_store(durability="full") as saver:
        assert saver.path == tmp_path / "custom" / "runs.db" and saver.durability == "full"
        ask(chat_graph(saver), "t", "hi")
    assert (tmp_path / "custom" / "runs.db").is_file()

    monkeypatch.delenv(DB_ENV_VAR)
    monkeypatch.chdir(tmp_path)
    with open_store() as saver:
        assert saver.path == tmp_path / "checkpoints" / "aworld.db"
        ask(chat_graph(saver), "t", "hi")
    assert (tmp_path / "checkpoints" / "aworld.db").is_file()


def test_a_store_that_must_exist_is_not_made(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "runs.db"
    with pytest.raises(ConfigError, match=f"no checkpoint database at {missing}; run something"):
        open_store(missing, create=False)
    assert not missing.parent.exists()
    with open_store(missing) as saver:
        ask(chat_graph(saver), "t", "hi")
    with open_store(missing, create=False) as saver:
        assert [t.thread_id for t in saver.threads()] == ["t"]


def test_a_shared_saver_is_one_per_store_and_durability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = open_store("shared.db", shared=True)
    try:
        assert open_store(tmp_path / "shared.db", shared=True) is first  # the same file
        assert open_store("shared.db") is not first  # not shared: the caller's own
        full = open_store("shared.db", durability="full", shared=True)
        assert full is not first and full.durability == "full"
        first.close()  # only its connections: it works on after
        ask(chat_graph(open_store("shared.db", shared=True)), "t", "hi")
        assert [t.thread_id for t in first.threads()] == ["t"]
    finally:
        first.close()
        open_store("shared.db", durability="full", shared=True).close()


def test_a_url_opens_postgresql(pg_url: str) -> None:
    with open_store(pg_url) as saver:
        assert saver.url == pg_url and saver.path is None
        ask(chat_graph(saver), "t", "hi")
        assert saver.database.dialect == "postgres"
    with pytest.raises(ConfigError, match="use a postgresql:// URL or a SQLite file path"):
        open_store("mysql://me@127.0.0.1/runs")


def test_the_saver_refuses_a_url_it_cannot_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TrajectorySaver`` given another database's URL says so, rather than making a SQLite
    file named after the URL."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="use a postgresql:// URL or a SQLite file path"):
        TrajectorySaver("mysql://me@127.0.0.1/runs")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_tables_beside_the_checkpoints_go_through_the_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A table of another part of the project (as the optimizer's) is written in the saver's
    transactions and read in its snapshots; a write that raises leaves nothing behind."""
    target = request.getfixturevalue("pg_url") if backend == "postgres" else tmp_path / "s.db"
    with open_store(target) as saver:
        saver.migrate()
        db = saver.database
        assert db.dialect == backend

        def make(tx: Tx) -> None:
            tx.run("CREATE TABLE IF NOT EXISTS beside (k TEXT PRIMARY KEY, v INTEGER)")
            tx.many("INSERT INTO beside (k, v) VALUES (?, ?)", [("a", 1), ("b", 2)])

        db.each(make)

        def half(tx: Tx) -> None:
            tx.run("INSERT INTO beside (k, v) VALUES (?, ?)", ("c", 3))
            raise RuntimeError("stop")

        with pytest.raises(RuntimeError, match="stop"):
            db.each(half)
        with db.read() as tx:
            assert tx.all("SELECT k, v FROM beside ORDER BY k") == [("a", 1), ("b", 2)]
        ask(chat_graph(saver), "t", "hi")  # the checkpoints beside them are as they were
        assert [t.thread_id for t in saver.threads()] == ["t"]
        if backend == "postgres":
            db.each(lambda tx: tx.run("DROP TABLE beside"))
