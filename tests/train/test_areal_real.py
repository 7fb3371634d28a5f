"""AReaL's agent workflow (aworld_graph.train.areal) with AReaL's own classes.

AReaL 1.0.4 requires ``torch<2.11``, so it runs in a venv of its own
(tests/train/trainer_venv.py, under ``.cache/``). There tests/train/areal_worker.py serves
AReaL's proxy server (its FastAPI app, on 127.0.0.1) with a stand-in ``InferenceEngine`` set
through the proxy's ``/create_engine`` and ``/call initialize`` endpoints, and runs
AReaL's ``OpenAIProxyWorkflow(mode="inline", agent=AReaLWorkflow(...))`` ``arun_episode`` on
dataset rows, as AReaL's rollout executor does. The engine sends the prompt ids AReaL's
``ArealOpenAI`` client built to a loopback token server here (tests/train/token_server.py),
which samples them greedily with the embedded model's GGUF (llama.cpp) and keeps what it
sampled; the proxy's tokenizer is the SmolLM2 tokenizer of that GGUF. The agent has no tools
(one LLM call an episode) and its reward function gives 1.0 whatever the model says.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aworld_graph.local import model_path
from tests.train.token_server import run_in_venv

pytestmark = [pytest.mark.slow, pytest.mark.local_model, pytest.mark.timeout(1800)]


@dataclass
class Rollouts:
    """What the worker printed (per episode: what AReaL exported or raised, and what the
    workflow kept) and every call the token server sampled, in order."""

    result: dict[str, Any]
    sampled: list[dict[str, Any]]


def tokenizer_folder(folder: Path) -> None:
    """The SmolLM2 tokenizer of the embedded model's GGUF, read by this project's
    transformers (the one AReaL pins reads it as a CodeLlama tokenizer that decodes spaces
    as ``<|endoftext|>``), for the proxy, which loads its tokenizer from a folder."""
    from transformers import AutoTokenizer

    gguf = model_path()
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(folder)


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory: pytest.TempPathFactory) -> Rollouts:
    home = tmp_path_factory.mktemp("areal")
    tokenizer_folder(home / "model")
    result, server = run_in_venv(
        "areal", "tests.train.areal_worker", home, module=True, args=[str(home / "model")]
    )
    return Rollouts(result, server.sampled)


def test_areal_exports_the_episode_with_the_reward_run_returned(rollouts: Rollouts) -> None:
    good, again = rollouts.result["good"], rollouts.result["again"]
    assert "raised" not in good, good["raised"]
    episode = good["episodes"][0]
    assert good["failed"] == 0 and episode["error"] is None
    # the workflow asked AReaL's proxy for no token ids (it returns none) and kept none
    assert episode["tokens"] == [None] and episode["sequences"] == []
    # one LLM call, one interaction; the reward run returned is the last one's
    [interaction] = good["interactions"]
    assert interaction["reward"] == episode["reward"] == 1.0
    assert interaction["rewards"] == [1.0]
    # what AReaL trains on is what the engine sampled for this episode's call
    sampled = rollouts.sampled[0]
    assert interaction["prompt_ids"] == sampled["prompt_ids"]
    assert interaction["completion_ids"] == sampled["token_ids"]
    assert interaction["logprobs"] == pytest.approx(sampled["log_probs"], abs=1e-5)
    # and the answer the store recorded for that call is that completion's text
    assert episode["answer"] and interaction["text"].strip() == episode["answer"].strip()
    # the same row in a fresh workflow: its own call, exported from its own proxy session
    [second] = again["interactions"]
    assert second["completion_ids"] == rollouts.sampled[1]["token_ids"]
    assert second["reward"] == again["episodes"][0]["reward"] == 1.0


def test_a_row_without_an_expected_answer_is_rejected(rollouts: Rollouts) -> None:
    bad = rollouts.result["no_answer"]
    reason = "row 0 has no expected answer for the reward function"
    # run raised RowError; AReaL's arun_episode raised it on (rejecting the trajectory)
    assert bad["raised"].startswith(f"RowError: {reason}")
    assert bad["failed"] == 1 and bad["errors"] == [bad["raised"].removeprefix("RowError: ")]
    assert "add 'expected'" in bad["errors"][0]
    # it never ran: no thread, and no call reached the engine (the two calls are the good
    # row's, with the same prompt)
    assert bad["episodes"][0]["thread"] is None
    assert len(rollouts.sampled) == 3  # the good row's two episodes and the resumed one
    assert rollouts.sampled[0]["prompt_ids"] == rollouts.sampled[1]["prompt_ids"]


def test_a_finished_episode_is_sampled_anew_on_a_thread_of_its_own(rollouts: Rollouts) -> None:
    """With ``run_id``, the row again in a fresh workflow (a restarted AReaL) after its first
    episode finished: a new thread, whose call reached the engine (the finished run is never
    read back: AReaL trains on what its proxy recorded in this session)."""
    first = rollouts.result["good"]["episodes"][0]
    second = rollouts.result["again"]["episodes"][0]
    assert first["thread"].startswith("areal-r1-") and first["thread"].endswith("-0")
    assert second["thread"] == first["thread"][:-1] + "1"
    assert first["status"] == second["status"] == "finished"
    assert rollouts.sampled[0]["prompt_ids"] == rollouts.sampled[1]["prompt_ids"]  # one each


def test_an_episode_cut_off_is_resumed_on_its_thread(rollouts: Rollouts) -> None:
    """An episode whose call failed (the inference server went away) is rejected by AReaL
    and left unfinished in the store; the row again in a fresh workflow of the same
    ``run_id`` (a restarted AReaL) resumes that thread, and AReaL exports the call it made."""
    cut, resumed = rollouts.result["cut"], rollouts.result["resumed"]
    assert "RowError" in cut["raised"] and cut["failed"] == 1
    [lost] = cut["episodes"]
    assert lost["status"] == "error" and lost["thread"].endswith("-0")
    [again] = resumed["episodes"]
    assert "raised" not in resumed, resumed.get("raised")
    assert again["thread"] == lost["thread"] and again["status"] == "finished"
    [interaction] = resumed["interactions"]
    assert interaction["reward"] == again["reward"] == 1.0
    assert interaction["completion_ids"] == rollouts.sampled[2]["token_ids"]
    assert interaction["text"].strip() == again["answer"].strip()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
