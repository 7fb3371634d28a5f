"""AReaL's side of tests/train/test_areal_real.py, run in AReaL's venv
(tests/train/trainer_venv.py): AReaL's own proxy server (its FastAPI ``app``) on a free
loopback port, its engine a stand-in :class:`StandInEngine` set through the proxy's
``/create_engine`` and ``/call initialize`` endpoints, as AReaL's controller sets its own,
and AReaL's ``OpenAIProxyWorkflow`` (inline mode) running
:class:`~aworld_graph.train.areal.AReaLWorkflow` episodes through it. The engine samples with
the embedded model behind the test's token server (token ids in, ids and logprobs out); the
proxy's tokenizer is the SmolLM2 tokenizer of the embedded model's GGUF, in a folder the test
writes (the transformers AReaL pins, <=5.3, reads that GGUF's tokenizer as a CodeLlama one
that decodes every space as ``<|endoftext|>``)."""

# ruff: noqa: E402 (AReaL is imported once litellm's renamed module has its old name too)
from __future__ import annotations

import asyncio
import importlib
import os
import sys
from typing import Any

import httpx
import uvicorn

# AReaL 1.0.4's proxy server imports litellm's Anthropic adapter from
# litellm.llms.anthropic.experimental_pass_through, which litellm 1.105 renamed pass_through
# (AReaL asks for litellm>=1.81.3, unbounded; a litellm from before the rename requires
# openai<3, which this project's openai>=3.57 excludes): the same module under its old name.
# litellm fetches its model cost map from GitHub at import unless told to read its own copy.
ADAPTERS = "litellm.llms.anthropic.{}.adapters.transformation"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.modules.setdefault(
    ADAPTERS.format("experimental_pass_through"),
    importlib.import_module(ADAPTERS.format("pass_through")),
)

from areal.api import InferenceEngine, cli_args
from areal.api.io_struct import ModelRequest, ModelResponse
from areal.experimental.openai.proxy import proxy_rollout_server
from areal.experimental.openai.proxy.workflow import OpenAIProxyWorkflow
from areal.infra import workflow_context
from areal.infra.rpc.serialization import serialize_value
from transformers import AutoTokenizer

from aworld_graph import Agent, AgentConfig
from aworld_graph.train.areal import AReaLWorkflow

ADMIN_KEY = "areal-test-admin-key"
"""The proxy's admin key (AReaL refuses its public default key off loopback)."""


class StandInEngine(InferenceEngine):
    """AReaL's ``InferenceEngine`` as the proxy's ``ArealOpenAI`` client uses it:
    ``agenerate`` sends the request's prompt ids and sampling settings to the token server
    at ``url`` and answers with the ids and logprobs it sampled."""

    def __init__(self, url: str, tokenizer_path: str) -> None:
        self.url = url
        self.config = cli_args.InferenceEngineConfig(
            tokenizer_path=tokenizer_path,
            agent=cli_args.AgentConfig(
                agent_cls_path="aworld_graph.train.areal.AReaLWorkflow",
                admin_api_key=ADMIN_KEY,
                mode="inline",
            ),
        )
        self.ready = False

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        self.ready = True

    @property
    def initialized(self) -> bool:
        return self.ready

    def destroy(self) -> None:
        self.ready = False

    def get_version(self) -> int:
        return 0

    async def agenerate(self, req: ModelRequest) -> ModelResponse:
        g = req.gconfig
        params = {"temperature": g.temperature, "top_p": g.top_p, "max_tokens": g.max_new_tokens}
        async with httpx.AsyncClient(timeout=300) as client:
            reply = await client.post(
                self.url + "/generate",
                json={"prompt_ids": req.input_ids, "sampling_params": params},
            )
        reply.raise_for_status()
        out = reply.json()
        ids = out["token_ids"]
        stopped = bool(ids) and ids[-1] in g.stop_token_ids
        return ModelResponse(
            input_tokens=list(req.input_ids),
            output_tokens=ids,
            output_logprobs=out["log_probs"],
            output_versions=[0] * len(ids),
            stop_reason="stop" if stopped else "length",
            tokenizer=req.tokenizer,
        )


class Proxy:
    """``async with Proxy(token_url, model_dir) as proxy:`` AReaL's proxy server on
    127.0.0.1 (``proxy.url``), its engine a :class:`StandInEngine`; stopped, and its engine
    destroyed, on exit."""

    def __init__(self, token_url: str, model_dir: str) -> None:
        self.token_url = token_url
        self.model_dir = model_dir
        config = uvicorn.Config(
            proxy_rollout_server.app, host="127.0.0.1", port=0, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None
        self.url = ""
        self.tokenizer: Any = None

    async def __aenter__(self) -> Proxy:
        self.task = asyncio.create_task(self.server.serve())
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        assert self.task is not None
        for _ in range(3000):  # startup takes milliseconds; bounded
            if self.server.started or self.task.done():
                break
            await asyncio.sleep(0.01)
        assert self.server.started, "AReaL's proxy server did not start"
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        init = {"url": self.token_url, "tokenizer_path": self.model_dir}
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as client:
            made = await client.post(
                "/create_engine",
                json={
                    "engine": "tests.train.areal_worker.StandInEngine",
                    "init_kwargs": serialize_value(init),
                },
            )
            made.raise_for_status()
            ready = await client.post("/call", json={"method": "initialize"})
            ready.raise_for_status()
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
        proxy_rollout_server.cleanup_engine()


def always_one(answer: str | None, expected: Any) -> float:
    """A reward that does not depend on what the model says (the test stays deterministic)."""
    return 1.0


AGENT = Agent(
    name="greeter",
    system_prompt="Answer in one short sentence.",
    conf=AgentConfig(llm_temperature=0.0, params={"max_tokens": 8}),
)
SCORED: dict[str, Any] = {"reward_func": always_one, "run_id": "r1"}
ROW = {"messages": [{"role": "user", "content": "Say hello."}], "answer": "hello"}
CUT_ROW = {"messages": [{"role": "user", "content": "Say goodbye."}], "answer": "bye"}


def interactions(exported: dict[str, Any] | None, tokenizer: Any) -> list[dict[str, Any]]:
    """What AReaL exported for an episode: each interaction's reward, and the prompt's and
    the completion's ids (the completion: the tokens of its loss mask, with their logprobs
    and text)."""
    out = []
    for key, interaction in (exported or {}).items():
        data = interaction.to_tensor_dict()
        mask = data["loss_mask"][0].tolist()
        ids = data["input_ids"][0].tolist()
        logprobs = data["logprobs"][0].tolist()
        completion = [t for t, m in zip(ids, mask, strict=True) if m]
        out.append(
            {
                "id": key,
                "reward": interaction.reward,
                "rewards": data["rewards"].tolist(),
                "prompt_ids": [t for t, m in zip(ids, mask, strict=True) if not m],
                "completion_ids": completion,
                "logprobs": [x for x, m in zip(logprobs, mask, strict=True) if m],
                "text": tokenizer.decode(completion, skip_special_tokens=True),
            }
        )
    return out


def stored(workflow: AReaLWorkflow) -> dict[str, Any]:
    """What the workflow counted, and what this project's store kept of each episode."""
    episodes = []
    for episode in workflow.episodes:
        response = episode.response
        trace = response.state.get("trace", []) if response is not None else []
        episodes.append(
            {
                "thread": episode.thread_id,
                "status": response.status if response is not None else None,
                "answer": response.answer if response is not None else None,
                "error": episode.error,
                "reward": episode.reward,
                "tokens": [r.get("tokens") for r in trace if r.get("kind") == "llm"],
                "sequences": [
                    {"completion_ids": s.completion_ids, "logprobs": list(s.logprobs)}
                    for s in episode.sequences
                ],
            }
        )
    return {"failed": workflow.failed, "errors": workflow.errors, "episodes": episodes}


async def episode(
    proxy: Proxy, workflow: AReaLWorkflow, row: dict[str, Any], task_id: int
) -> dict[str, Any]:
    """One ``arun_episode`` of AReaL's ``OpenAIProxyWorkflow`` (inline) running ``workflow``
    as AReaL's workflow executor runs it (its task id in the workflow context): the
    interactions it exported, or what it raised, and what the workflow kept."""
    workflow_context.set(workflow_context.WorkflowContext(task_id=task_id))
    areal = OpenAIProxyWorkflow(
        mode="inline", agent=workflow, proxy_addr=proxy.url, admin_api_key=ADMIN_KEY
    )
    try:
        exported = await areal.arun_episode(None, row)
    except Exception as exc:  # AReaL rejects the trajectory: the test reads why
        return {"raised": f"{type(exc).__name__}: {exc}", **stored(workflow)}
    return {"interactions": interactions(exported, proxy.tokenizer), **stored(workflow)}


async def down(token_url: str, is_down: bool) -> None:
    """Make the token server fail every generation (or stop failing)."""
    async with httpx.AsyncClient(timeout=30) as client:
        (await client.post(token_url + "/down", json={"down": is_down})).raise_for_status()


async def main(token_url: str, model_dir: str) -> dict[str, Any]:
    """A good row, a row without an expected answer, and the good row again in a fresh
    workflow of the same ``run_id`` (a restarted AReaL), each an episode of its own; then
    another row whose episode is cut off (the inference server fails its call) and that row
    again in a fresh workflow."""
    async with Proxy(token_url, model_dir) as proxy:
        out = {
            "good": await episode(proxy, AReaLWorkflow(agent=AGENT, **SCORED), ROW, 0),
            "no_answer": await episode(
                proxy, AReaLWorkflow(agent=AGENT, **SCORED), {"prompt": "Say hi."}, 1
            ),
            "again": await episode(proxy, AReaLWorkflow(agent=AGENT, **SCORED), ROW, 2),
        }
        await down(token_url, True)
        try:
            out["cut"] = await episode(proxy, AReaLWorkflow(agent=AGENT, **SCORED), CUT_ROW, 3)
        finally:
            await down(token_url, False)
        out["resumed"] = await episode(proxy, AReaLWorkflow(agent=AGENT, **SCORED), CUT_ROW, 4)
        return out


if __name__ == "__main__":
    import json

    print(json.dumps(asyncio.run(main(*sys.argv[1:3]))), flush=True)
