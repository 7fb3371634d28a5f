"""The GGUF file the embedded model serves, loaded by transformers (the trainer's view)."""

from __future__ import annotations

import functools
from typing import Any

from aworld_graph.local import model_path


@functools.cache
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    path = model_path()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def causal_lm() -> Any:
    """A fresh copy of the weights (de-quantized to float32) for each caller that trains."""
    from transformers import AutoModelForCausalLM

    path = model_path()
    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
