"""ms-swift's multi-turn scheduler (aworld_graph.train.swift) with ms-swift's own classes.

ms-swift 4.6.0 pins ``transformers<5.20`` and ``trl<1``, below this project's, so it runs in
a venv of its own (tests/train/trainer_venv.py, under ``.cache/``). A script there takes the
scheduler from ms-swift's ``multi_turns`` registry, builds it as ``swift rollout`` does
(``infer_engine=``, ``max_turns=``) with a stand-in inference engine that returns ms-swift's
``ChatCompletionResponse``: it renders the request with the SmolLM2 tokenizer (from the GGUF
the embedded model serves) and has the loopback token server here
(tests/train/token_server.py) sample the ids.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.train.token_server import run_in_venv

SCRIPT = r"""
import asyncio, json, sys

import httpx
from transformers import AutoTokenizer
from swift.infer_engine.protocol import (
    ChatCompletionResponse, ChatCompletionResponseChoice, ChatMessage, RequestConfig,
    RolloutInferRequest, RolloutOutput, UsageInfo,
)
from swift.rollout.multi_turn import MultiTurnScheduler, multi_turns

from aworld_graph import Agent
import aworld_graph.train.swift  # puts AWorldScheduler in multi_turns

url, gguf_dir, gguf_name = sys.argv[1:4]
tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)


class StandInEngine:
    # ms-swift's GRPO engine's infer_async: a request in, a ChatCompletionResponse with ids out
    tokenizer = tokenizer

    async def infer_async(self, infer_request, request_config, **kwargs):
        prompt = tokenizer.apply_chat_template(
            infer_request.messages, add_generation_prompt=True, tokenize=True
        )
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        params = {"temperature": request_config.temperature, "max_tokens": request_config.max_tokens}
        async with httpx.AsyncClient(timeout=300) as client:
            reply = (await client.post(
                url + "/generate", json={"prompt_ids": prompt, "sampling_params": params}
            )).json()
        ids = reply["token_ids"]
        choice = ChatCompletionResponseChoice(
            index=0,
            message=ChatMessage(role="assistant", content=tokenizer.decode(ids, skip_special_tokens=True)),
            finish_reason="stop",
            logprobs={"content": [{"logprob": lp} for lp in reply["log_probs"]]},
            token_ids=ids,
        )
        return ChatCompletionResponse(
            model="smollm2", choices=[choice], usage=UsageInfo(len(prompt), len(ids), len(prompt) + len(ids)),
            prompt_token_ids=prompt,
        )


def raises(answer, expected):
    raise RuntimeError("scorer down")


def has(answer, expected):
    return 1.0 if answer and expected in answer else 0.0


async def main():
    cls = multi_turns["aworld"]
    agent = Agent(name="solver", system_prompt="Answer with the number only.")
    request = RolloutInferRequest(
        messages=[{"role": "user", "content": "What is 2+3?"}], data_dict={"solution": "5"}
    )
    config = RequestConfig(max_tokens=24, temperature=1.0)
    cls.configure(agent=agent, reward_func=has)
    scheduler = cls(infer_engine=StandInEngine(), max_turns=4)
    out = await scheduler.run(request, config)
    assert isinstance(out, RolloutOutput)
    cls.configure(agent=agent, reward_func=raises)
    failed = await cls(infer_engine=StandInEngine(), max_turns=4).run(request, config)
    ids = out.response_token_ids[0]
    print(json.dumps({
        "is_scheduler": isinstance(scheduler, MultiTurnScheduler),
        "out": out.model_dump(mode="json"),
        "response_clean": tokenizer.decode(ids, skip_special_tokens=True),
        "prompt_ids": out.response.prompt_token_ids,
        "failed": failed.model_dump(mode="json"),
    }))


asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.timeout(3600)
def test_swift_scheduler_with_swifts_classes(tmp_path: Any) -> None:
    result, server = run_in_venv("swift", SCRIPT, tmp_path)
    out = result["out"]
    assert result["is_scheduler"]
    last = server.sampled[-2]  # the failed run's call came after
    assert result["prompt_ids"] == last["prompt_ids"]
    assert out["response_token_ids"] == [last["token_ids"]]
    assert out["rollout_logprobs"][0] == pytest.approx(last["log_probs"], abs=1e-6)
    assert len(out["response_loss_mask"][0]) == len(last["token_ids"])
    assert set(out["response_loss_mask"][0]) == {1}
    answer = out["messages"][-1]["content"]
    assert out["messages"][-1]["role"] == "assistant"
    assert answer and result["response_clean"] == answer  # the stored text, from the ids
    assert out["rollout_infos"]["aworld_reward"] == (1.0 if "5" in answer else 0.0)
    assert out["rollout_infos"]["num_turns"] == 1
    failed = result["failed"]
    assert "scorer down" in failed["rollout_infos"]["aworld_error"]
    assert set(failed["response_loss_mask"][0]) <= {0}  # nothing of it is in the loss
    # ms-swift's request ids are new at every rollout: the same request again is sampled anew
    # on a thread of its own, never read back as another episode's run
    threads = [out["rollout_infos"]["aworld_thread"], failed["rollout_infos"]["aworld_thread"]]
    assert threads[0] != threads[1] and all(t.startswith("swift-0-") for t in threads)
    assert len(server.sampled) == 2
