"""verl episodes named from what verl's workers know, and resumed from the store, on both of
verl's PPO trainers.

In verl's venv (tests/train/trainer_venv.py) scripts build verl's real worker subclasses from
verl's own default trainer config (its model folder holds the SmolLM2 tokenizer and config of
the embedded model's GGUF, no weights): :class:`~aworld_graph.train.verl.AWorldAgentLoopWorker`
(the trainer of ``trainer.use_v1=False``) runs ``generate_sequences`` on a ``DataProto`` batch
the way that trainer hands it one (``meta_info["global_steps"]``, ``validate``, the dataset's
``index`` column and the ``priority`` column verl's ``AgentLoopManager`` numbers the batch
with); :class:`~aworld_graph.train.verl.AWorldAgentLoopWorkerTQ` (the V1 trainer) runs it on a
``TensorDict`` batch as V1 builds one (verl's ``collate_fn``, a new ``uid`` a prompt,
``global_steps``), on a local Ray instance with verl's TransferQueue, whose outputs are read
back from the queue. The model behind verl's server manager is a stand-in: the script sends
the prompt ids' text to a scripted loopback server here and tokenizes the reply with the same
tokenizer (a tool call for ``add``, then the answer ``4``), reporting weight version 2; the
``add`` tool appends a line to a file for each run, so a tool call run twice shows (the
venv's side: tests/train/verl_worker.py). One script starts
:class:`~aworld_graph.train.verl.AWorldAgentLoopManager` as verl's trainers do, for each
trainer, its workers Ray actors on a local Ray instance that the script shuts down.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aworld_graph.checkpoint import open_store
from aworld_graph.local import model_path
from tests.server.conftest import LiveServer
from tests.train.trainer_venv import ROOT, Unavailable, trainer_python

WEIGHTS = 2
"""The weight version tests/train/verl_worker.py's stand-in server reports."""

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ARGS = """
import asyncio, json, sys

from tests.train.verl_worker import batch, setup, summary, trainer_config, worker

url, model_dir, gguf, log, experiment, trainer = sys.argv[1:7]
setup(model_dir, gguf, log)
"""

NAMES = (
    ARGS
    + r"""
from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopWorker
from verl.utils.import_utils import load_class_from_fqn

from aworld_graph.train.verl import AWorldAgentLoopManagerTQ

mine = worker(url, model_dir)
results = {}


def run(name, made, data):
    results[name] = summary(asyncio.run(made.generate_sequences(data)))


run("step3", mine, batch(["2+2 (A)"], 3, n=2))
run("step3_again", worker(url, model_dir), batch(["2+2 (A)"], 3, n=2))  # verl restarted
run("val3", mine, batch(["2+2 (A)"], 3, validate=True))
run("step4", mine, batch(["2+2 (A)"], 4, n=2))
run("other_data", mine, batch(["2+2 (Z)"], 3))  # exp1 reused on other data
run("named", worker(url, model_dir, experiment_name="exp2"), batch(["2+2 (A)"], 3))
run("plain", worker(url, model_dir, AgentLoopWorker), batch(["2+2 (A)"], 3))  # verl's own
run("never_resumed", worker(url, model_dir, resume_mode="disable"), batch(["2+2 (A)"], 3))

# verl's trainer loads actor_rollout_ref.rollout.agent.agent_loop_manager_class this way
manager_class = load_class_from_fqn(
    "aworld_graph.train.verl.AWorldAgentLoopManager", "AgentLoopManager"
)
manager = manager_class(trainer_config(model_dir), None)
refused = None
try:  # built directly, not with create as verl builds it (MANAGED), it refuses V1
    manager_class(trainer_config(model_dir, use_v1=True), None)
except ValueError as exc:
    refused = str(exc)
refused_tq = None
try:  # V1's manager under the trainer of trainer.use_v1=False
    AWorldAgentLoopManagerTQ(trainer_config(model_dir), None)
except ValueError as exc:
    refused_tq = str(exc)
workers = manager.agent_loop_workers_class.__ray_metadata__.modified_class
results["manager"] = {
    "is_manager": issubclass(manager_class, AgentLoopManager),
    "workers": workers.__mro__[1].__qualname__,
    "refused": refused,
    "refused_tq": refused_tq,
}
print(json.dumps(results))
"""
)

KILLED = (
    ARGS
    + """
# step 3 of each run named in experiment (comma-separated), one after the other
out = []
if trainer == "v1":  # verl's V1 trainer's worker, on a local Ray instance and TransferQueue
    from aworld_graph.train.verl import AWorldAgentLoopWorkerTQ
    from tests.train.verl_worker import start_ray, stop_ray, v1_batch, v1_run

    start_ray()
    for name in experiment.split(","):
        made = worker(url, model_dir, AWorldAgentLoopWorkerTQ, experiment_name=name, use_v1=True)
        out.append(asyncio.run(v1_run(made, v1_batch(["2+2 (A)", "2+2 (B)"], 3))))
    stop_ray()
else:
    for name in experiment.split(","):
        made = worker(url, model_dir, experiment_name=name)
        data = batch(["2+2 (A)", "2+2 (B)"], 3)
        out.append(summary(asyncio.run(made.generate_sequences(data))))
print(json.dumps(out))
"""
)

MANAGED = (
    ARGS
    + r"""
from pathlib import Path

from transformers import AutoTokenizer
from verl.trainer.ppo.v1 import AgentLoopManagerTQ, AgentLoopWorkerTQ

from aworld_graph.train.verl import AWorldAgentLoopManager, AWorldAgentLoopWorkerTQ
from tests.train.verl_worker import (
    StandInServerManager, start_ray, stop_ray, v1_batch, v1_outputs, v1_run,
)

verls_worker = AgentLoopWorkerTQ.__ray_metadata__.modified_class.__ray_actor_class__  # unwrapped

loops = Path(log).parent / "agent_loops.yaml"
loops.write_text(
    "- name: aworld_agent\n"
    "  _target_: aworld_graph.train.verl.AWorldAgentLoop\n"
    "  agent: tests.train.verl_worker:plain\n"
)


def create(**trainer):
    # as verl's trainers build the class named in agent_loop_manager_class: two Ray workers
    config = trainer_config(model_dir, n=2, **trainer)
    config.actor_rollout_ref.rollout.agent.num_workers = 2
    config.actor_rollout_ref.rollout.agent.agent_loop_config_path = str(loops)
    llm_client = StandInServerManager(url, AutoTokenizer.from_pretrained(model_dir))
    return AWorldAgentLoopManager.create(config=config, llm_client=llm_client)


start_ray()
results = {}
try:
    manager = create()
    # a prompt's two samples, which the manager splits between its two workers
    results["legacy"] = [
        summary(manager.generate_sequences(batch(["2+2 (A)"], 3, n=2, numbered=False)))
        for _ in range(2)
    ]
    # the same setting for verl's V1 trainer: its manager hands each worker whole prompts,
    # whose outputs go to the TransferQueue; twice the same step (a new uid each time)
    v1 = create(use_v1=True)
    workers = v1.agent_loop_workers_class.__ray_metadata__.modified_class
    results["v1_manager"] = {
        "is_tq": isinstance(v1, AgentLoopManagerTQ),
        "workers": workers.__mro__[1].__qualname__,
        "verls": issubclass(workers, verls_worker),
    }
    results["v1"] = []
    for _ in range(2):
        data = v1_batch(["2+2 (A)", "2+2 (B)"], 3)
        v1.generate_sequences(data)
        results["v1"].append(v1_outputs(list(data["uid"]), "train"))

    # V1's worker in this process (the agent whose tool counts its runs)
    def run(name, made, data):
        results[name] = asyncio.run(v1_run(made, data))

    mine = worker(url, model_dir, AWorldAgentLoopWorkerTQ, n=2, use_v1=True)
    run("v1_step5", mine, v1_batch(["2+2 (A)"], 5))
    again = worker(url, model_dir, AWorldAgentLoopWorkerTQ, n=2, use_v1=True)  # verl restarted
    run("v1_step5_again", again, v1_batch(["2+2 (A)"], 5))
    run("v1_val5", mine, v1_batch(["2+2 (A)"], 5, validate=True))
    run("v1_plain", worker(url, model_dir, verls_worker, use_v1=True), v1_batch(["2+2 (A)"], 5))
    # a row without a user message: the run fails before its first call
    run("v1_bad_row", mine, v1_batch([[{"role": "system", "content": "no task"}]], 5))
finally:
    stop_ray()
print(json.dumps(results))
"""
)


class Scripted:
    """The model behind the stand-in server manager: a tool call for ``add``, then ``4`` once
    the prompt holds the tool's result. :attr:`requests` keeps each call's task and whether it
    was the answering call; while :attr:`hold` names a task, its answering call waits."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, bool]] = []
        self.hold: str | None = None
        self.app = Starlette(routes=[Route("/generate", self.generate, methods=["POST"])])

    async def generate(self, request: Request) -> JSONResponse:
        prompt = (await request.json())["prompt"]
        task = prompt.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
        answering = "<|im_start|>tool" in prompt
        self.requests.append((task, answering))
        for _ in range(1200):  # 60 s at most
            if not (answering and self.hold is not None and self.hold in task):
                break
            await asyncio.sleep(0.05)
        call = {"name": "add", "arguments": {"a": 2, "b": 2}}
        return JSONResponse(
            {"text": "4" if answering else f"<tool_call>{json.dumps(call)}</tool_call>"}
        )


@pytest.fixture
def scripted() -> Iterator[tuple[Scripted, str]]:
    server = Scripted()
    with LiveServer(server.app) as live:
        yield server, live.url


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verl-model")


def _venv() -> Path:
    try:
        return trainer_python("verl")
    except Unavailable as exc:
        pytest.skip(str(exc))


def _start(
    script: str,
    url: str,
    model_dir: Path,
    log: Path,
    experiment: str = "exp1",
    trainer: str = "legacy",
) -> subprocess.Popen[str]:
    """``script`` in verl's venv, on this test's store (``AWORLD_GRAPH_DB``); ``trainer``:
    which of verl's trainers' workers (``legacy``: ``trainer.use_v1=False``, or ``v1``)."""
    args = [url, str(model_dir), str(model_path()), str(log), experiment, trainer]
    return subprocess.Popen(
        [str(_venv()), "-c", script, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(log.parent),
            "RAY_USAGE_STATS_ENABLED": "0",
            "AWORLD_GRAPH_DB": os.environ["AWORLD_GRAPH_DB"],
        },
    )


def _result(proc: subprocess.Popen[str]) -> Any:
    """The JSON the script printed last, once it exited 0."""
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def test_the_thread_is_named_from_what_verls_worker_knows(
    scripted: tuple[Scripted, str], model_dir: Path, tmp_path: Path
) -> None:
    server, url = scripted
    log = tmp_path / "tools.log"
    result = _result(_start(NAMES, url, model_dir, log))
    step3 = result["step3"]["threads"]
    # run_id: trainer.experiment_name; the sample's place in the batch tells a group's two
    # samples apart; the dataset row's index, and a digest of the prompt and ground truth
    assert [t.rsplit("-", 1)[0] for t in step3] == [
        "verl-exp1-train-s3-b0-i10",
        "verl-exp1-train-s3-b1-i10",
    ]
    assert result["step3"]["answers"] == ["4", "4"] and result["step3"]["rm_scores"] == [1.0, 1.0]
    # the weight version verl's server sampled each call with, for verl's off-policy checks
    assert result["step3"]["weights"] == [[WEIGHTS, WEIGHTS]] * 2
    # verl restarted on step 3 (another worker, the same batch): each episode is read back,
    # its weight version from the store
    assert result["step3_again"]["threads"] == step3
    assert result["step3_again"]["responses"] == result["step3"]["responses"]
    assert result["step3_again"]["weights"] == result["step3"]["weights"]
    assert result["val3"]["threads"][0].startswith("verl-exp1-val-s3-b0-i10-")
    assert result["step4"]["threads"][0].startswith("verl-exp1-train-s4-b0-i10-")
    # the same step, place and index with another prompt (exp1 reused on other data): the
    # digest gives it a thread of its own, never the other row's episode
    other = result["other_data"]["threads"][0]
    assert other.startswith("verl-exp1-train-s3-b0-i10-") and other != step3[0]
    assert result["named"]["threads"][0].startswith("verl-exp2-train-s3-b0-i10-")
    # verl's own worker hands the loop no step: a new thread
    assert result["plain"]["threads"][0].startswith("verl-10-")
    assert len(result["plain"]["threads"][0]) == len("verl-10-") + 32
    # a run that never resumes (trainer.resume_mode=disable) has no run_id: a new thread
    never = result["never_resumed"]["threads"][0]
    assert never.startswith("verl-10-") and never != result["plain"]["threads"][0]
    # step 3 twice, the repeat read back; validation, step 4 twice, other data, exp2, verl's
    # own worker, the run never resumed: each sampled (a tool call and the answer)
    assert len(server.requests) == 2 * (2 + 1 + 2 + 1 + 1 + 1 + 1)
    assert len(log.read_text().split()) == 9
    manager = result["manager"]
    assert manager["is_manager"] and manager["workers"] == "AWorldAgentLoopWorker"
    assert "AWorldAgentLoopManager.create" in manager["refused"]
    assert "name AWorldAgentLoopManager" in manager["refused_tq"]


def managers_give_their_ray_workers_the_samples_steps(
    scripted: tuple[Scripted, str], model_dir: Path, tmp_path: Path
) -> None:
    """(Run inside the Ray tests' loopback-only namespace, tests/scale/test_verl_on_ray.py.)
    The manager as verl's trainers build it (``create``), its workers Ray actors. Under the
    trainer of ``trainer.use_v1=False`` the batch is split among them and each numbers a
    group's samples from 0 in its own chunk, so the sample's place in the whole batch (verl's
    ``priority``) tells them apart. Under the V1 trainer the same setting gives verl's
    ``AgentLoopManagerTQ`` with workers of this module, each running whole prompts whose
    sessions are numbered; outputs go to verl's TransferQueue."""
    server, url = scripted
    log = tmp_path / "tools.log"
    result = _result(_start(MANAGED, url, model_dir, log))
    first, again = result["legacy"]
    assert [t.rsplit("-", 1)[0] for t in first["threads"]] == [
        "verl-exp1-train-s3-b0-i10",
        "verl-exp1-train-s3-b1-i10",
    ]
    assert again["threads"] == first["threads"]  # the same step again: read back
    assert result["v1_manager"] == {
        "is_tq": True,
        "workers": "AWorldAgentLoopWorkerTQ",
        "verls": True,
    }
    first, again = result["v1"]
    # the step, the dataset row's index and the session: what V1's worker knows of a sample
    assert [t.rsplit("-", 1)[0] for t in first["threads"]] == [
        "verl-exp1-train-s3-i10-n0",
        "verl-exp1-train-s3-i10-n1",
        "verl-exp1-train-s3-i11-n0",
        "verl-exp1-train-s3-i11-n1",
    ]
    assert first["weights"] == [[WEIGHTS, WEIGHTS]] * 4
    # the same step again, the prompts under new uids (verl's dataloader gives them at each
    # fetch): every episode read back from the store
    assert again["threads"] == first["threads"] and again["responses"] == first["responses"]
    assert again["weights"] == first["weights"]
    # V1's worker in this process, with the agent whose tool counts its runs
    step5 = result["v1_step5"]["threads"]
    assert [t.rsplit("-", 1)[0] for t in step5] == [
        "verl-exp1-train-s5-i10-n0",
        "verl-exp1-train-s5-i10-n1",
    ]
    assert result["v1_step5"]["rm_scores"] == [1.0, 1.0]
    assert result["v1_step5_again"]["threads"] == step5  # another worker, the same step
    assert result["v1_step5_again"]["responses"] == result["v1_step5"]["responses"]
    assert [t.rsplit("-", 1)[0] for t in result["v1_val5"]["threads"]] == [
        "verl-exp1-val-s5-i10-n0"
    ]
    # verl's own V1 worker hands the loop no step: a new thread
    plain = result["v1_plain"]["threads"]
    assert len(plain) == 1 and plain[0].startswith("verl-10-")
    assert len(plain[0]) == len("verl-10-") + 32
    # a run that failed before its first call: no training data, and the weight version its
    # step samples with (verl's V1 trainer reads one for every output)
    bad = result["v1_bad_row"]
    assert bad["answers"] == [None, None] and "no user message" in bad["errors"][0]
    assert bad["weights"] == [[4, 4]] * 2
    # legacy: the first time (the second read back); V1's manager: four samples the first
    # time; step 5 (two samples, a tool call and the answer each), validation, verl's own
    assert len(server.requests) == 2 + 4 + 2 * (2 + 1 + 1)
    assert len(log.read_text().split()) == 4


def _kill_when(proc: subprocess.Popen[str], ready: Callable[[], bool]) -> None:
    """SIGKILL ``proc`` once ``ready()`` holds; fails if it ends before or takes 10 minutes."""
    deadline = time.monotonic() + 600
    try:
        while not ready():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the rollout never got where it is killed"
            time.sleep(0.1)
    finally:
        proc.kill()  # SIGKILL
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _finished(prefix: str) -> bool:
    """Whether the store holds a finished run on a thread whose id starts with ``prefix``."""
    saver = open_store()
    for thread in saver.threads():
        if thread.thread_id.startswith(prefix):
            stored = saver.get_tuple({"configurable": {"thread_id": thread.thread_id}})
            values = stored.checkpoint["channel_values"] if stored is not None else {}
            return values.get("status") == "finished"
    return False


def test_a_verl_rollout_killed_mid_way_resumes_its_episodes(
    scripted: tuple[Scripted, str], model_dir: Path, tmp_path: Path
) -> None:
    # the V1 trainer's case runs on Ray, inside the Ray tests' loopback-only namespace
    # (tests/scale/test_verl_on_ray.py)
    killed_mid_way_resumes(scripted, model_dir, tmp_path, "legacy", ["b0-i10", "b1-i11"])


def killed_mid_way_resumes(
    scripted: tuple[Scripted, str],
    model_dir: Path,
    tmp_path: Path,
    trainer: str,
    places: list[str],
) -> None:
    """verl's rollout process killed (SIGKILL) while sample B's answering call is in flight,
    after sample A finished and B's tool call ran; verl restarted on the same step (the same
    store) reads A back without a model call and resumes B without running its tool again.
    ``trainer``: the workers of verl's trainer of ``trainer.use_v1=False`` or of its V1
    trainer (which, restarted, gives the step's prompts new uids)."""
    server, url = scripted
    log = tmp_path / "tools.log"
    threads = [f"verl-exp1-train-s3-{place}-" for place in places]
    server.hold = "(B)"
    proc = _start(KILLED, url, model_dir, log, trainer=trainer)
    try:
        _kill_when(proc, lambda: ("2+2 (B)", True) in server.requests and _finished(threads[0]))
    finally:
        server.hold = None
    assert log.read_text().split() == ["4", "4"]  # A's and B's tool calls ran
    server.requests.clear()
    # verl restarted on step 3; then, in the same process, step 3 of another run (exp2, so
    # nothing is read back): what a rollout never cut short gives
    again, clean = _result(_start(KILLED, url, model_dir, log, "exp1,exp2", trainer))
    assert server.requests[0] == ("2+2 (B)", True)  # A read back; B resumed at its answer
    # B's finished tool call was not run again: the two lines after the killed run's are exp2's
    assert log.read_text().split() == ["4", "4"] + ["4", "4"]
    assert again["answers"] == ["4", "4"] and again["rm_scores"] == [1.0, 1.0]
    assert [t.rsplit("-", 1)[0] + "-" for t in again["threads"]] == threads
    assert len(server.requests) == 1 + 4
    assert clean["responses"] == again["responses"] and clean["rm_scores"] == again["rm_scores"]
    assert clean["weights"] == again["weights"] == [[WEIGHTS, WEIGHTS]] * 2
