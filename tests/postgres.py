"""Throw-away PostgreSQL servers for tests: a fresh cluster in a temporary directory.

``PostgresServer`` runs ``initdb`` and ``postgres`` from the installed server programs
(``find_bin_dir``), listening on 127.0.0.1 (and on the addresses a test names with
``listen``, a network namespace's of its own), with trust authentication and durability
turned off. Leaving the context stops the server and deletes its directory, whatever
happened inside. ``skip_reason`` says why such a server cannot run here, for a test to skip.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

SUPERUSER = "postgres"
"""The superuser ``initdb`` creates (``-U``), whichever OS user runs the server."""

OS_USER = "nobody"
"""The unprivileged OS user that runs ``initdb`` and ``postgres`` when tests run as root
(both refuse to run as root)."""

PROGRAMS = ("initdb", "postgres", "pg_isready", "pg_dump")
"""The server programs the helper runs, all from one bin directory."""

_STARTS = 3  # attempts, each on a new free port: another process may take the one we picked


def find_bin_dir() -> Path | None:
    """The directory of PostgreSQL's server programs, or None when none is installed.

    ``initdb`` on PATH first (its symlinks resolved, so that every program comes from the
    same installation); then the highest version in Debian's ``/usr/lib/postgresql/<v>/bin``.
    """
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = [d for d in Path("/usr/lib/postgresql").glob("*/bin") if (d / "initdb").is_file()]
    if not versions:
        return None
    return max(versions, key=lambda d: [int(n) for n in re.findall(r"\d+", d.parent.name)])


def skip_reason() -> str | None:
    """Why a PostgreSQL test cannot run here, or None when it can."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        return (
            "PostgreSQL's server programs are not installed (no initdb on PATH or in "
            "/usr/lib/postgresql/*/bin); run tests/setup.sh or install Debian's postgresql"
        )
    missing = [p for p in PROGRAMS if not (bin_dir / p).is_file()]
    if missing:
        return f"{bin_dir} lacks {', '.join(missing)}; install PostgreSQL's server package"
    for module, package in (("psycopg", "psycopg[binary]"), ("psycopg_pool", "psycopg-pool")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed; pip install -e '.[dev]'"
    return None


class PostgresServer:
    """A PostgreSQL server of its own, for the length of a ``with`` block.

    Entering runs ``initdb`` in a new temporary directory and starts ``postgres`` on a free
    port of 127.0.0.1, waiting until it accepts connections; leaving stops it (fast
    shutdown, then SIGKILL) and deletes the directory. Should the test process itself die,
    the server gets SIGINT from the kernel (``setpriv --pdeathsig``) and shuts down; the
    kernel sends it when the thread that entered exits, so enter on a thread that outlives
    the server (pytest's main thread does).
    """

    def __init__(
        self,
        *,
        start_timeout: float = 60.0,
        stop_timeout: float = 15.0,
        listen: tuple[str, ...] = (),
    ) -> None:
        """``listen``: addresses to listen on besides 127.0.0.1 (a test's own network
        namespace's); clients on their subnets are trusted as local ones are."""
        reason = skip_reason()
        if reason is not None:
            raise RuntimeError(reason)
        self._listen = listen
        self._bin = find_bin_dir() or Path()
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0

    @property
    def directory(self) -> Path:
        """The temporary directory: the cluster in ``data/``, the log, the Unix socket."""
        if self._dir is None:
            raise RuntimeError("the server is not running; use it inside `with PostgresServer()`")
        return self._dir

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1."""
        self._running()
        return self._port

    @property
    def pid(self) -> int:
        """The process id of the postmaster."""
        return self._running().pid

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL for database ``dbname``, as the superuser (no password: trust)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Creates database ``name`` and returns its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def dump(self, dbname: str) -> str:
        """The SQL text of ``pg_dump`` for database ``dbname``: every stored row, as text."""
        result = subprocess.run(
            [str(self._bin / "pg_dump"), "--no-password", *self._conn_args(), "-d", dbname],
            env=_env(),
            capture_output=True,
            check=False,
            timeout=60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"pg_dump {dbname} failed: {result.stderr.decode(errors='replace')}")
        return result.stdout.decode()

    def __enter__(self) -> PostgresServer:
        try:
            self._start()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    def _start(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="aworld-pg-"))
        owner = _owner()
        if owner is not None:
            os.chown(self._dir, owner.pw_uid, owner.pw_gid)
        self._run_initdb(owner)
        for attempt in range(1, _STARTS + 1):
            self._port = _free_port()
            self._spawn(owner)
            if self._wait_ready(last_attempt=attempt == _STARTS):
                return

    def _run_initdb(self, owner: pwd.struct_passwd | None) -> None:
        result = subprocess.run(
            [
                str(self._bin / "initdb"),
                *("-D", str(self.directory / "data")),
                *("-U", SUPERUSER),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            env=_env(),
            capture_output=True,
            check=False,
            timeout=self._start_timeout,
            **_as_owner(owner),
        )
        if result.returncode != 0:
            hint = ""
            if owner is not None:
                hint = f" (it runs as {owner.pw_name}: can that user reach {self.directory}?)"
            output = (result.stdout + result.stderr).decode(errors="replace")
            raise RuntimeError(f"initdb failed{hint}:\n{output}")
        if self._listen:
            with open(self.directory / "data" / "pg_hba.conf", "a") as hba:
                hba.write("host all all samenet trust\n")

    def _spawn(self, owner: pwd.struct_passwd | None) -> None:
        settings = {
            "listen_addresses": ",".join(("127.0.0.1", *self._listen)),
            "port": str(self._port),
            "unix_socket_directories": str(self.directory),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        guard = ["setpriv", "--pdeathsig=INT", "--"] if shutil.which("setpriv") else []
        command = [*guard, str(self._bin / "postgres"), "-D", str(self.directory / "data")]
        for name, value in settings.items():
            command += ["-c", f"{name}={value}"]
        with open(self.directory / "postgres.log", "ab") as log:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                start_new_session=True,  # Ctrl-C in the terminal reaches pytest, not the server
                **_as_owner(owner),
            )

    def _wait_ready(self, *, last_attempt: bool) -> bool:
        """Whether the server accepts connections; False when it could not bind its port."""
        proc = self._running()
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._proc = None
                log = self._log_tail()
                if "could not bind" in log and not last_attempt:
                    return False
                raise RuntimeError(f"postgres exited with status {proc.returncode}:\n{log}")
            ready = subprocess.run(
                [str(self._bin / "pg_isready"), "-q", "-t", "1", *self._conn_args()],
                env=_env(),
                check=False,
                timeout=10,
            )
            if ready.returncode == 0:
                return True
            time.sleep(0.05)
        raise RuntimeError(
            f"postgres did not accept connections within {self._start_timeout} s:\n"
            + self._log_tail()
        )

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown: ends sessions, then exits
            try:
                proc.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                children = _children(proc.pid)
                proc.kill()
                proc.wait()
                for child in children:
                    try:
                        os.kill(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("the server is not running; use it inside `with PostgresServer()`")
        return self._proc

    def _conn_args(self) -> list[str]:
        return ["-h", "127.0.0.1", "-p", str(self._port), "-U", SUPERUSER]

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.directory / "postgres.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def _owner() -> pwd.struct_passwd | None:
    """The OS user to run the server programs as: None means the current one."""
    return pwd.getpwnam(OS_USER) if os.geteuid() == 0 else None


def _as_owner(owner: pwd.struct_passwd | None) -> dict[str, object]:
    """``subprocess`` arguments that run a program as ``owner`` with no extra groups."""
    if owner is None:
        return {}
    return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}


def _env() -> dict[str, str]:
    """The environment without libpq's ``PG*`` variables, so that only our arguments count."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """The ids of the processes whose parent is ``pid`` (the postmaster's backends)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found
