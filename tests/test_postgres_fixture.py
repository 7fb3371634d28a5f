"""The throw-away PostgreSQL servers of tests/postgres.py: usable, local-only, and gone after."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.postgres import PostgresServer, skip_reason

REASON = skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
REPO = Path(__file__).resolve().parents[1]


def _connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _server_processes(pid: int) -> set[int]:
    """The postmaster ``pid`` and its children."""
    found = {pid}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return found


def _listeners(port: int) -> list[str]:
    """The local addresses (hex, as in /proc/net/tcp*) listening on TCP ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.append(address)
    return found


def test_create_insert_select(pg_url: str) -> None:
    with _connect(pg_url) as conn:
        conn.execute("CREATE TABLE runs (id serial PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO runs (name) VALUES (%s), (%s)", ("first", "second"))
        rows = conn.execute("SELECT id, name FROM runs ORDER BY id").fetchall()
    assert rows == [(1, "first"), (2, "second")]


def test_listens_on_loopback_only(postgres_server: PostgresServer) -> None:
    with _connect(postgres_server.url()) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    assert _listeners(postgres_server.port) == ["0100007F"]  # 127.0.0.1, nothing on IPv6
    assert postgres_server.url("x") == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/x"


def test_dump_contains_inserted_value(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database("dump_check")
    with _connect(url) as conn:
        conn.execute("CREATE TABLE blobs (data bytea)")
        conn.execute("INSERT INTO blobs VALUES (%s)", (b"marker-4f2a",))
    dump = postgres_server.dump("dump_check")
    assert "CREATE TABLE public.blobs" in dump
    assert b"marker-4f2a".hex() in dump  # bytea is dumped as \x<hex>


def test_databases_are_separate(postgres_server: PostgresServer, pg_url: str) -> None:
    other = postgres_server.create_database("separate_check")
    with _connect(other) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with _connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('only_here')").fetchone() == (None,)


def test_exit_stops_the_server_and_removes_its_directory() -> None:
    with PostgresServer() as server:
        directory = server.directory
        conn = _connect(server.url())  # an open session: fast shutdown must end it
        try:
            processes = _server_processes(server.pid)
            assert len(processes) > 2  # the postmaster, its helpers, this session's backend
            server.__exit__(None, None, None)
        finally:
            conn.close()
    assert not [pid for pid in processes if _alive(pid)]
    assert not directory.exists()


def test_an_error_inside_still_stops_the_server() -> None:
    with pytest.raises(ZeroDivisionError), PostgresServer() as server:
        directory, processes = server.directory, _server_processes(server.pid)
        1 / 0  # noqa: B018
    assert not [pid for pid in processes if _alive(pid)]
    assert not directory.exists()


def test_a_killed_test_process_takes_its_server_with_it(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from tests.postgres import PostgresServer

        server = PostgresServer().__enter__()
        print(server.pid, server.directory, flush=True)
        time.sleep(600)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        postmaster, directory = child.stdout.readline().split()
        processes = _server_processes(int(postmaster))
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    deadline = time.monotonic() + 20
    while [pid for pid in processes if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in processes if _alive(pid)]
    shutil.rmtree(directory)  # the killed process could not delete it
