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


@functools.cache
def _loaded() -> tuple[Any, Any]:
    """The model transformers loads from the GGUF file (its config and weights), read once:
    reading the file and mapping its tensor names takes most of a minute on two cores."""
    from transformers import AutoModelForCausalLM

    path = model_path()
    loaded = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    settings = {k: v for k, v in loaded.config.to_dict().items() if k != "quantization_config"}
    return type(loaded)(type(loaded.config).from_dict(settings)), loaded.state_dict()


@functools.cache
def original_reader() -> Any:
    """``GGUFReader`` of the embedded model's file, read once: gguf parses every field (the
    tokenizer's 49,152 tokens and merges) element by element, seconds a read."""
    from gguf import GGUFReader

    return GGUFReader(model_path())


def causal_lm() -> Any:
    """A fresh, trainable copy of the weights for each caller that trains (a caller's
    training never reaches another's model).

    transformers de-quantizes the GGUF tensors to float32 but marks the model as quantized
    (its ``GgufHfQuantizer``), and ``Trainer`` refuses to fine-tune a quantized model; the
    same weights are loaded into a plain model of the same config instead."""
    import copy

    template, weights = _loaded()
    plain = copy.deepcopy(template)
    plain.load_state_dict(weights)
    return plain
