"""A loopback token server for the trainer adapters' tests: token ids in, sampled ids and
their logprobs out, as verl's rollout servers answer, with the embedded model's GGUF
(llama.cpp in this environment, so no trainer venv has to build it)."""

from __future__ import annotations

from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aworld_graph.local import model_path


class TokenServer:
    """Token in, token out with the embedded model's GGUF, as verl's rollout servers do:
    ``POST /generate {prompt_ids, sampling_params}`` → ``{token_ids, log_probs}`` (the end
    token included when sampled). :attr:`sampled` keeps every reply."""

    def __init__(self) -> None:
        from llama_cpp import Llama

        self.llama = Llama(model_path=str(model_path()), n_ctx=2048, verbose=False, seed=7)
        self.sampled: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/generate", self.generate, methods=["POST"])])

    async def generate(self, request: Request) -> JSONResponse:
        body = await request.json()
        params = body.get("sampling_params") or {}
        llama = self.llama
        ids: list[int] = []
        logprobs: list[float] = []
        steps = llama.generate(
            [int(t) for t in body["prompt_ids"]],
            temp=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=max(int(params.get("top_k", 0)), 0),
            reset=True,
        )
        try:
            for token in steps:
                # the logits it was sampled from: the context's last row
                row = np.asarray(llama.scores[llama.n_tokens - 1], dtype=np.float64)
                shifted = row - row.max()
                logprobs.append(float(shifted[token] - np.log(np.exp(shifted).sum())))
                ids.append(int(token))
                if token == llama.token_eos() or len(ids) >= int(params.get("max_tokens", 48)):
                    break
        finally:
            steps.close()
        reply = {"token_ids": ids, "log_probs": logprobs, "stop_reason": "completed"}
        self.sampled.append({"prompt_ids": body["prompt_ids"], **reply})
        return JSONResponse(reply)
