"""The cluster steps of docs/scale-out.md, between two network namespaces.

The head is this test run's own namespace (the loopback-only one ``test_netns.py`` made);
the test adds a second namespace for a worker machine and joins the two with a veth pair
whose addresses it makes (``HEAD`` and ``WORKER``, on nothing but that pair). In the head's
namespace: a throw-away PostgreSQL server, a fake OpenAI model endpoint on ``HEAD``, and the
Ray head started with the docs' own ``ray start --head`` line (token authentication on, as
the docs say); in the worker's, the docs' ``ray start --address`` line with the head's
token. A batch goes to both machines with ``aworld-graph run --batch --engine ray``; once a
task on the worker machine has finished its tool call, every process of that machine is
killed. Every task then finishes once, on what is left, and no finished tool call runs again.
Everything the test starts is stopped, and the namespace deleted, whatever happens.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.postgres import PostgresServer, skip_reason

from .marks import marked

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "scale-out.md"
HEAD, WORKER = "10.213.7.1", "10.213.7.2"
"""The veth pair's addresses (a /24 of the test's own)."""
RAY = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())"]
"""``ray`` with this interpreter."""
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]
TASKS = [f"task-{i}" for i in range(6)]
ANSWER_DELAY = 2.0
"""Seconds the model takes for a task's answer (after its tool call): the worker machine is
killed in that window."""


def _doc_steps() -> tuple[dict[str, str], list[str], list[str]]:
    """From the docs' cluster block: the Ray settings every machine exports, and the head's
    and a worker's ``ray start`` arguments (addresses as the docs write them)."""
    text = DOC.read_text().split("## A cluster, step by step", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    exports: dict[str, str] = {}
    starts: list[list[str]] = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            for word in words[1:]:
                name, _, value = word.partition("=")
                if name == "RAY_AUTH_MODE":
                    exports[name] = value
        elif words[:2] == ["ray", "start"]:
            starts.append(words[2:])
    heads = [s for s in starts if "--head" in s]
    workers = [s for s in starts if "--head" not in s]
    assert exports == {"RAY_AUTH_MODE": "token"}, block
    assert len(heads) == len(workers) == 1, block
    return exports, heads[0], workers[0]


def _addressed(args: list[str], port: int) -> list[str]:
    return [a.replace("10.0.0.1", HEAD).replace("6379", str(port)) for a in args]


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    try:
        import ray  # noqa: F401
    except ImportError:
        return "the ray extra is not installed"
    return skip_reason()


class _Model:
    """An OpenAI-compatible endpoint on ``HEAD`` (reached from both namespaces): a task's
    first call asks for the ``record`` tool, the call after the tool's result answers, after
    ``ANSWER_DELAY`` seconds. ``requests`` holds every request's messages."""

    def __init__(self) -> None:
        self.requests: list[list[dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                messages = body["messages"]
                outer.requests.append(messages)
                last = messages[-1]
                task = next(m["content"] for m in messages if m["role"] == "user")
                message: dict[str, Any] = {"role": "assistant", "content": None}
                if last["role"] == "tool":
                    time.sleep(ANSWER_DELAY)
                    message["content"] = f"{task} is done"
                else:
                    arguments = json.dumps({"task": task})
                    message["tool_calls"] = [
                        {
                            "id": f"call_{uuid.uuid4().hex[:8]}",
                            "type": "function",
                            "function": {"name": "record", "arguments": arguments},
                        }
                    ]
                data = json.dumps(
                    {
                        "id": f"chatcmpl-{uuid.uuid4().hex}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "stop" if message["content"] else "tool_calls",
                            }
                        ],
                        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer((HEAD, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{HEAD}:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Cluster:
    """What the test starts, found again to be stopped: processes carry a marker in their
    environment (which every process Ray starts inherits), one per machine."""

    def __init__(self, tmp: Path) -> None:
        tag = uuid.uuid4().hex[:6]
        self.netns = f"aw-worker-{tag}"
        self.links = (f"awh{tag}", f"aww{tag}")
        self.marks = {"head": f"head-{tag}", "worker": f"worker-{tag}"}
        self.tmp = tmp
        self.ray_tmp = Path(tempfile.mkdtemp(prefix="rk-", dir="/tmp"))  # short: socket paths
        self.started: list[subprocess.Popen[str]] = []
        self.namespace_made = False

    def make_namespace(self) -> None:
        head_link, worker_link = self.links
        _ip("netns", "add", self.netns)
        self.namespace_made = True
        _ip(
            "link",
            "add",
            head_link,
            "type",
            "veth",
            "peer",
            "name",
            worker_link,
            "netns",
            self.netns,
        )
        _ip("addr", "add", f"{HEAD}/24", "dev", head_link)
        _ip("link", "set", head_link, "up")
        inside = ["ip", "netns", "exec", self.netns, "ip"]
        for args in (
            ["addr", "add", f"{WORKER}/24", "dev", worker_link],
            ["link", "set", worker_link, "up"],
            ["link", "set", "lo", "up"],
        ):
            subprocess.run([*inside, *args], check=True, capture_output=True)

    def namespace_inode(self) -> str:
        return f"net:[{os.stat(f'/run/netns/{self.netns}').st_ino}]"

    def start(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        log.close()
        self.started.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def marked(self, machine: str) -> list[int]:
        return marked(self.marks[machine])

    def kill(self, machine: str) -> list[int]:
        pids = self.marked(machine)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def close(self) -> None:
        for process in self.started:  # `ray start --block` stops its node's processes
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        deadline = time.monotonic() + 10
        while any(self.marked(m) for m in self.marks) and time.monotonic() < deadline:
            time.sleep(0.2)
        for machine in self.marks:
            self.kill(machine)
        if self.namespace_made:  # its end of the veth pair goes with it, and so the pair
            subprocess.run(["ip", "netns", "delete", self.netns], capture_output=True)
        shutil.rmtree(self.ray_tmp, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HEAD, 0))
        return int(s.getsockname()[1])


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[_Cluster]:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    made = _Cluster(tmp_path)
    try:
        made.make_namespace()
    except subprocess.CalledProcessError as exc:
        made.close()
        pytest.skip(f"`ip netns` is not permitted here ({(exc.stderr or '').strip()})")
    try:
        yield made
    finally:
        made.close()
        assert all(made.marked(m) == [] for m in made.marks), "a Ray process was left"
        assert not Path(f"/run/netns/{made.netns}").exists(), "the namespace was left"


def _wait_for(
    what: str, ready: Any, process: subprocess.Popen[str], log: Any, limit: float
) -> None:
    deadline = time.monotonic() + limit
    while not ready():
        assert process.poll() is None, f"{what} exited ({process.returncode}):\n{log()[-4000:]}"
        assert time.monotonic() < deadline, f"{what} not ready in {limit} s:\n{log()[-4000:]}"
        time.sleep(0.2)


@pytest.mark.timeout(420)
def test_a_batch_on_the_docs_cluster_survives_losing_the_worker_machine(
    cluster: _Cluster, tmp_path: Path
) -> None:
    exports, head_args, worker_args = _doc_steps()
    port = _free_port()
    head_args = _addressed(head_args, port)
    worker_args = _addressed(worker_args, port)
    assert head_args[head_args.index("--node-ip-address") + 1] == HEAD
    assert worker_args == ["--address", f"{HEAD}:{port}"]
    home = tmp_path / "home"  # the head's ~/.ray/auth_token is the test's, not the user's
    home.mkdir()
    tool_log = tmp_path / "tool-calls.txt"
    tool_log.touch()
    model = _Model()
    try:
        with PostgresServer(listen=(HEAD,)) as postgres:
            postgres.create_database("aworld")
            store = f"postgresql://postgres@{HEAD}:{postgres.port}/aworld"
            base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "LLM_"))}
            # the model is on HEAD, not 127.0.0.1: the suite's switch that blocks any other
            # endpoint is off for these processes (the namespaces reach nothing but each other)
            base.pop("AWORLD_GRAPH_BLOCK_REMOTE", None)
            base.update(
                exports,
                HOME=str(home),
                RAY_USAGE_STATS_ENABLED="0",
                LLM_BASE_URL=model.url,
                LLM_MODEL_NAME="fake-model",
                AWORLD_TEST_TOOL_LOG=str(tool_log),
                # a lost machine is declared dead after about 2 s (Ray's default: 15–30 s)
                RAY_health_check_period_ms="500",
                RAY_health_check_failure_threshold="4",
            )
            head_env = {**base, "AWORLD_TEST_MARK": cluster.marks["head"]}
            token = subprocess.run(
                [*RAY, "get-auth-token", "--generate"],
                env=head_env,
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout.strip()
            assert len(token) >= 32 and (home / ".ray" / "auth_token").read_text() == token
            test_only = ["--num-cpus", "2", "--include-dashboard", "false", "--block"]
            test_only += ["--temp-dir", str(cluster.ray_tmp / "head"), "--disable-usage-stats"]
            head = cluster.start("head", [*RAY, "start", *head_args, *test_only], head_env)
            _wait_for(
                "the head",
                lambda: "Ray runtime started" in cluster.log("head"),
                head,
                lambda: cluster.log("head"),
                120,
            )
            elsewhere = tmp_path / "worker-home"  # another machine: no ~/.ray/auth_token
            elsewhere.mkdir()
            worker_env = {
                **base,
                "HOME": str(elsewhere),
                "RAY_AUTH_TOKEN": token,
                "AWORLD_TEST_MARK": cluster.marks["worker"],
            }
            worker_only = [
                "--num-cpus",
                "1",
                "--block",
                "--temp-dir",
                str(cluster.ray_tmp / "worker"),
            ]
            worker = cluster.start(
                "worker",
                ["ip", "netns", "exec", cluster.netns, *RAY, "start", *worker_args, *worker_only],
                worker_env,
            )
            _wait_for(
                "the worker node",
                lambda: "Ray runtime started" in cluster.log("worker"),
                worker,
                lambda: cluster.log("worker"),
                120,
            )

            batch = tmp_path / "inputs.jsonl"
            batch.write_text("".join(json.dumps({"input": t, "id": t}) + "\n" for t in TASKS))
            driver_env = {
                **base,
                "RAY_ADDRESS": f"{HEAD}:{port}",
                "AWORLD_TEST_MARK": cluster.marks["head"],
            }
            args = ["run", "tests/scale/workflows/record.yaml", "--batch", str(batch)]
            args += ["--engine", "ray", "--workers", "2", "--concurrency", "1", "--db", store]
            driver = cluster.start("driver", [*CLI, *args, "--no-progress"], driver_env)

            worker_ns = cluster.namespace_inode()

            def worker_finished_a_tool_call() -> bool:  # its result is saved: the model has it
                return any(
                    m[-1]["role"] == "tool" and worker_ns in str(m[-1]["content"])
                    for m in list(model.requests)
                )

            _wait_for(
                "a tool call on the worker machine",
                worker_finished_a_tool_call,
                driver,
                lambda: cluster.log("driver"),
                180,
            )
            killed = cluster.kill("worker")  # the machine is lost: raylet, workers, all
            assert len(killed) >= 3, killed
            driver.wait(timeout=240)
            out = cluster.log("driver")
            assert driver.returncode == 0, out[-6000:]
            assert f"{len(TASKS)} tasks: {len(TASKS)} ok, 0 failed" in out, out[-6000:]
            assert re.search(
                r"worker pid \d+ died .*; resumed on worker pid \d+ from checkpoint", out
            ), out
            # Ray reports the lost machine, but no warning about finding this machine's
            # address or about its token authentication
            assert "Failed to determine local IP" not in out, out
            assert "Token authentication is" not in out, out
    finally:
        model.close()

    answered = dict(re.findall(r"^(task-\d+)\tfinished\t(.*)$", out, re.M))
    assert answered == {t: f"{t} is done" for t in TASKS}, out
    calls = [line.split() for line in tool_log.read_text().splitlines()]
    where = {namespace for _, namespace, _ in calls}
    assert worker_ns in where and len(where) == 2, calls  # the batch ran on both machines
    assert Counter(task for task, _, _ in calls) == Counter(TASKS), calls  # each ran once
