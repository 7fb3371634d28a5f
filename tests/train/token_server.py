"""A loopback token server for the trainer adapters' tests: token ids in, sampled ids and
their logprobs out, as verl's rollout servers answer, with the embedded model's GGUF
(llama.cpp in this environment, so no trainer venv has to build it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aworld_graph.local import model_path
from tests.server.conftest import LiveServer
from tests.train.trainer_venv import ROOT, Unavailable, trainer_python


class TokenServer:
    """Token in, token out with the embedded model's GGUF, as verl's rollout servers do:
    ``POST /generate {prompt_ids, sampling_params}`` → ``{token_ids, log_probs}`` (the end
    token included when sampled). :attr:`sampled` keeps every reply. ``POST /down
    {"down": true}`` makes every generation fail (HTTP 503) until ``{"down": false}``: a
    rollout cut off mid-episode."""

    def __init__(self) -> None:
        from llama_cpp import Llama

        self.llama = Llama(model_path=str(model_path()), n_ctx=2048, verbose=False, seed=7)
        self.sampled: list[dict[str, Any]] = []
        self.down = False
        self.app = Starlette(
            routes=[
                Route("/generate", self.generate, methods=["POST"]),
                Route("/down", self.set_down, methods=["POST"]),
            ]
        )

    async def set_down(self, request: Request) -> JSONResponse:
        self.down = bool((await request.json())["down"])
        return JSONResponse({"down": self.down})

    async def generate(self, request: Request) -> JSONResponse:
        if self.down:
            return JSONResponse({"error": "the inference server went away"}, status_code=503)
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


def run_in_venv(
    trainer: str,
    script: str,
    home: Path,
    *,
    module: bool = False,
    args: list[str] | None = None,
) -> tuple[dict[str, Any], TokenServer]:
    """Run ``script`` (Python code; with ``module``, a module's name) in ``trainer``'s venv
    (tests/train/trainer_venv.py), with ``home`` as its home and its store, and a token server
    up: its arguments are the server's URL, then ``args`` (by default the GGUF's folder and
    file name); it prints its result as JSON on its last line. Returns that result and the
    server (what it sampled). Skips the test, saying why, when the venv cannot be built
    (PyPI out of reach)."""
    try:
        python = trainer_python(trainer)
    except Unavailable as exc:
        pytest.skip(str(exc))
    server = TokenServer()
    path = model_path()
    rest = [str(path.parent), path.name] if args is None else args
    with LiveServer(server.app) as live:
        done = subprocess.run(
            [str(python), "-m" if module else "-c", script, live.url, *rest],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(home),
                "RAY_USAGE_STATS_ENABLED": "0",
                "AWORLD_GRAPH_DB": str(home / "store.db"),  # not the checkout's default store
                "HF_HUB_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false",
            },
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), server
