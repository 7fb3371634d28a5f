"""Core engine overhead: one agent, one LLM call, checkpointing on.

Times ``aworld_graph.Runners.run`` on a single-LLM-call task against

* the bare ``openai.AsyncOpenAI().chat.completions.create`` call to the same loopback server
  (goal: ours ≤ 3x), and
* AWorld 0.3.2 doing the same work (``Runners.sync_run`` of an AWorld ``Agent``), run by
  ``_aworld_driver.py`` inside its own venv ``bench/.venv-aworld`` (created on first use).

All three talk to the project's fake OpenAI server (``tests/fake_openai.py``) on 127.0.0.1,
started once here, so every number comes from the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
VENV = BENCH_DIR / ".venv-aworld"
AWORLD_REQUIREMENTS = ["aworld==0.3.2", "pydantic<2.12"]
ANSWER = "The answer is 42."
QUESTION = "What is 6*7?"
SYSTEM = "You answer briefly."

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# ---------------------------------------------------------------------------- timing helpers


async def _timed(fn: Callable[[], Awaitable[Any]], runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - started)
    return times


def _ms(times: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(times) * 1e3,
        "mean": statistics.mean(times) * 1e3,
        "p90": sorted(times)[int(0.9 * (len(times) - 1))] * 1e3,
    }


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _fake_server() -> Any:
    from tests.fake_openai import FakeOpenAI, text

    server = FakeOpenAI()
    server.default = text(ANSWER)
    # The fake server writes the response head and body in two send()s. Without TCP_NODELAY,
    # on a kept-alive connection the body waits for the client's delayed ACK (~40 ms on Linux),
    # which makes every call on a reused connection cost 40+ ms and hides all overhead.
    handler = getattr(getattr(server, "_server", None), "RequestHandlerClass", None)
    if handler is not None:
        handler.disable_nagle_algorithm = True
    return server


# ---------------------------------------------------------------------------- ours and bare


def _saver() -> tuple[Any, str]:
    """The project's default saver (on ``$AWORLD_GRAPH_DB``), else InMemorySaver; plus a note."""
    try:
        from aworld_graph.checkpoint import open_store

        saver = open_store(shared=True)
        return saver, f"saver={type(saver).__name__} (SQLite file)"
    except ImportError as exc:
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver(), f"saver=InMemorySaver: TrajectorySaver not importable ({exc})"


async def _measure_ours_and_bare(url: str, runs: int, warmup: int) -> dict[str, Any]:
    import openai

    from aworld_graph import Agent, AgentConfig, Runners

    saver, saver_note = _saver()
    agent = Agent(
        name="bench_agent",
        system_prompt=SYSTEM,
        conf=AgentConfig(llm_base_url=url, llm_model_name="fake-model", llm_api_key="not-needed"),
    )
    answers: list[Any] = []

    async def ours() -> None:
        response = await Runners.run(QUESTION, agent=agent, checkpointer=saver)
        answers.append((response.answer, response.success, response.llm_calls))

    client = openai.AsyncOpenAI(base_url=url, api_key="not-needed")
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]

    async def bare() -> None:
        completion = await client.chat.completions.create(model="fake-model", messages=messages)
        assert completion.choices[0].message.content == ANSWER

    # Interleave in rounds so drift (CPU frequency, other load) hits both sides alike.
    t_ours: list[float] = []
    t_bare: list[float] = []
    await _timed(ours, 0, warmup)
    await _timed(bare, 0, warmup)
    rounds = 5
    for r in range(rounds):
        n = runs // rounds + (1 if r < runs % rounds else 0)
        t_ours += await _timed(ours, n, 0)
        t_bare += await _timed(bare, n, 0)
    await client.close()
    bad = [a for a in answers if a != (ANSWER, True, 1)]
    if bad:
        raise RuntimeError(f"aworld_graph run did not answer as scripted: {bad[0]!r}")
    return {"ours": _ms(t_ours), "bare": _ms(t_bare), "saver_note": saver_note}


# ---------------------------------------------------------------------------- AWorld 0.3.2


class AWorldUnavailable(Exception):
    """AWorld could not be installed or run; the message says why."""


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _aworld_version(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('aworld'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_aworld_venv() -> Path:
    """``bench/.venv-aworld``'s python with AWorld 0.3.2 installed (created on first use)."""
    python = _venv_python()
    if _aworld_version(python) == "0.3.2":
        return python
    log = VENV / "bench-install.log"
    if not python.exists():
        print(
            f"bench_core: creating {VENV} for AWorld 0.3.2 (one-off, a few minutes)",
            file=sys.stderr,
            flush=True,
        )
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True, timeout=300
        )
        if made.returncode != 0 or not python.exists():
            raise AWorldUnavailable(
                f"python -m venv {VENV} failed: {(made.stderr or made.stdout)[-300:]}"
            )
    with open(log, "w") as out:
        try:
            installed = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    *AWORLD_REQUIREMENTS,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=1800,
            )
        except subprocess.TimeoutExpired:
            raise AWorldUnavailable(
                f"pip install {' '.join(AWORLD_REQUIREMENTS)} timed out; see {log}"
            ) from None
    if installed.returncode != 0:
        tail = [
            ln
            for ln in log.read_text().splitlines()
            if ln.strip() and not ln.startswith("WARNING: Location")
        ]
        raise AWorldUnavailable(
            f"pip install {' '.join(AWORLD_REQUIREMENTS)} failed (rc={installed.returncode}): "
            f"{' | '.join(tail[-3:])[-300:]} (full log: {log})"
        )
    version = _aworld_version(python)
    if version != "0.3.2":
        raise AWorldUnavailable(
            f"after install, aworld in {VENV} is {version!r}, not 0.3.2; see {log}"
        )
    return python


def measure_aworld(url: str, runs: int, warmup: int) -> dict[str, Any]:
    python = ensure_aworld_venv()
    with tempfile.TemporaryDirectory(prefix="bench-aworld-") as work:
        # AWorld writes ./logs and talks a lot on stderr: keep both out of the way.
        log = Path(work) / "driver.log"
        env = {
            **os.environ,
            "LLM_BASE_URL": url,
            "LLM_MODEL_NAME": "fake-model",
            "LLM_API_KEY": "not-needed",
            "PYTHONPATH": "",
        }
        with open(log, "w") as err:
            try:
                done = subprocess.run(
                    [
                        str(python),
                        str(BENCH_DIR / "_aworld_driver.py"),
                        url,
                        str(runs),
                        str(warmup),
                        ANSWER,
                    ],
                    cwd=work,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    timeout=120 + 30 * (runs + warmup),
                )
            except subprocess.TimeoutExpired:
                raise AWorldUnavailable("the AWorld driver timed out") from None
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("BENCH_RESULT ")]
        if done.returncode != 0 or not lines:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise AWorldUnavailable(
                f"AWorld driver failed (rc={done.returncode}): {' | '.join(tail)[-400:]}"
            )
        result = json.loads(lines[-1].removeprefix("BENCH_RESULT "))
        result["offline_tiktoken"] = "openaipublic.blob.core.windows.net" in log.read_text(
            errors="replace"
        )
    if result["wrong_answers"]:
        raise AWorldUnavailable(f"AWorld answered wrongly: {result['wrong_answers'][0]}")
    return result


# ---------------------------------------------------------------------------- entry point


def run(quick: bool = False) -> list[dict[str, Any]]:
    runs, warmup = (10, 3) if quick else (50, 5)
    aw_runs, aw_warmup = (3, 1) if quick else (10, 2)
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-core-") as tmp,
        _env(AWORLD_GRAPH_DB=str(Path(tmp) / "bench.db")),
        _fake_server() as server,
    ):
        m = asyncio.run(_measure_ours_and_bare(server.url, runs, warmup))
        ours, bare = m["ours"], m["bare"]
        rows.append(
            {
                "name": "1 agent, 1 LLM call: ours vs bare openai call",
                "ours": ours["median"],
                "peer": bare["median"],
                "ratio": ours["median"] / bare["median"],
                "goal": "<= 3x",
                "unit": "ms",
                "note": (
                    f"median of {runs}; means {ours['mean']:.2f} vs {bare['mean']:.2f} ms; "
                    f"overhead {ours['median'] - bare['median']:.2f} ms/run; {m['saver_note']}"
                ),
            }
        )
        try:
            aw = measure_aworld(server.url, aw_runs, aw_warmup)
        except (AWorldUnavailable, OSError, subprocess.SubprocessError, ValueError) as exc:
            rows.append(
                {
                    "name": "1 agent, 1 LLM call: ours vs AWorld 0.3.2",
                    "ours": ours["median"],
                    "peer": None,
                    "ratio": None,
                    "goal": "<= 1x",
                    "unit": "ms",
                    "error": f"AWorld not measured: {exc}",
                }
            )
        else:
            note = (
                f"AWorld: median of {aw['runs']} Runners.sync_run "
                f"(mean {aw['mean_s'] * 1e3:.0f} ms, fresh Agent per run); ours median as above"
            )
            if aw.get("offline_tiktoken"):
                note += "; AWorld's tiktoken download failed (offline), it carried on"
            rows.append(
                {
                    "name": "1 agent, 1 LLM call: ours vs AWorld 0.3.2",
                    "ours": ours["median"],
                    "peer": aw["median_s"] * 1e3,
                    "ratio": ours["median"] / (aw["median_s"] * 1e3),
                    "goal": "<= 1x",
                    "unit": "ms",
                    "note": note,
                }
            )
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(json.dumps(row))
