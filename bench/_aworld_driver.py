"""AWorld 0.3.2 side of ``bench_core``: run inside ``bench/.venv-aworld``, not the project env.

    .venv-aworld/bin/python _aworld_driver.py BASE_URL RUNS WARMUP EXPECTED

Builds one AWorld ``Agent`` per run (an AWorld agent keeps its LLM client bound to the event
loop of its first run; ``Runners.sync_run`` starts a new loop each time, so a reused agent
fails with "Event loop is closed" and then sleeps 10 s in its retry backoff) and times only
``Runners.sync_run`` on one single-LLM-call task. The last stdout line is
``BENCH_RESULT {json}`` with seconds per run.
"""

from __future__ import annotations

import json
import statistics
import sys
import time


def main() -> None:
    base_url, runs, warmup, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    t0 = time.perf_counter()
    from aworld.agents.llm_agent import Agent
    from aworld.config.conf import AgentConfig
    from aworld.runner import Runners

    import_s = time.perf_counter() - t0
    conf = AgentConfig(
        llm_provider="openai",
        llm_model_name="fake-model",
        llm_base_url=base_url,
        llm_api_key="not-needed",
    )
    times: list[float] = []
    wrong: list[str] = []
    for i in range(warmup + runs):
        agent = Agent(name="bench_agent", conf=conf, system_prompt="You answer briefly.")
        started = time.perf_counter()
        response = Runners.sync_run(input="What is 6*7?", agent=agent)
        elapsed = time.perf_counter() - started
        if i >= warmup:
            times.append(elapsed)
            if response is None or response.answer != expected:
                wrong.append(repr(getattr(response, "answer", response))[:200])
    result = {
        "aworld": _version(),
        "runs": len(times),
        "mean_s": statistics.mean(times),
        "median_s": statistics.median(times),
        "min_s": min(times),
        "import_s": import_s,
        "wrong_answers": wrong,
    }
    print("BENCH_RESULT " + json.dumps(result), flush=True)


def _version() -> str:
    from importlib.metadata import version

    return version("aworld")


if __name__ == "__main__":
    main()
