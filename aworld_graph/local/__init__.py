"""The embedded model: SmolLM2-135M-Instruct served by llama.cpp on 127.0.0.1.

* :mod:`.model` – :class:`LocalModel` (a :class:`~aworld_graph.model.ChatModel`), the server
  process's life (:class:`LocalServer`: started on first use, shared through a state file,
  ended with its parent) and :func:`check` (one real completion: does this build run here?);
* :mod:`.server` – the server process, ``python -m aworld_graph.local.server``;
* :mod:`.handler` – the chat handler llama-cpp-python calls (``aworld-smollm2``): a call or a
  reply chosen by log-probability, arguments under a grammar (:mod:`.grammar`);
* :mod:`.template` – the prompt the model reads, as text (:func:`render`).

Nothing here imports llama.cpp until a server starts, so the room costs nothing to import.
"""

from __future__ import annotations

from .model import (
    MODEL_ALIAS,
    REBUILD,
    LocalModel,
    LocalServer,
    check,
    ensure_server,
    model_path,
    serve_forever,
    state_file,
)
from .template import render

__all__ = [
    "MODEL_ALIAS",
    "REBUILD",
    "LocalModel",
    "LocalServer",
    "check",
    "ensure_server",
    "model_path",
    "render",
    "serve_forever",
    "state_file",
]
