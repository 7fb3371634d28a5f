"""Trained weights back into a GGUF file, so the embedded llama.cpp server serves them.

>>> written = write_gguf(model, original="SmolLM2-135M-Instruct.Q4_1.gguf",   # doctest: +SKIP
...                      out="trained/SmolLM2-135M-Instruct.Q4_1.gguf")

transformers reads a GGUF file (``from_pretrained(..., gguf_file=...)``) by de-quantizing
every tensor to float32, renaming it from GGUF's ``blk.N.attn_q.weight`` to the model's
``model.layers.N.self_attn.q_proj.weight`` and, for the llama family, undoing the row
permutation llama.cpp's converter applies to the query and key projections (llama.cpp
computes rotary embeddings on interleaved pairs, Hugging Face on halves). :func:`write_gguf`
goes the other way, with transformers' own name map: each tensor is permuted back and
quantized to the type it had in the original file (``gguf.quants``; F32 for a 1-D tensor and
F16 otherwise where the gguf package cannot quantize that type). The metadata and the
tokenizer are copied unchanged.

Re-quantizing to a 4-bit type rounds each weight to a step of its block's scale, far larger
than a fine-tuning step (a learning rate of 1e-5 moves a weight by about that much), so the
update can vanish in the new file. ``tensor_type="F32"`` writes every updated tensor as
float32 (the trained values exactly); ``"F16"`` as float16 (half the size; its resolution,
about 1e-3 of a weight's magnitude, can still round away the smallest steps). 1-D tensors
(norms) are written as F32 in both.

A tensor whose values are exactly those the original file de-quantizes to keeps its original
bytes: re-quantizing a de-quantized tensor can move a value by a rounding step, and a tensor
the training did not touch should not change. Tensors the model has no parameter for are
copied as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["WrittenGGUF", "write_gguf"]

_IDENTITY_PROCESSORS = ("TensorProcessor", "LlamaTensorProcessor")
"""transformers' tensor processors whose mapping this module inverts (a rename, and for the
llama family the query/key permutation); other architectures reshape or split tensors."""


@dataclass(kw_only=True)
class WrittenGGUF:
    """What :func:`write_gguf` wrote."""

    path: Path
    """The new GGUF file."""
    tensors: int
    """How many tensors it holds (as many as the original)."""
    updated: list[str] = field(default_factory=list)
    """GGUF names of the tensors written from the model's new values."""
    kept: list[str] = field(default_factory=list)
    """GGUF names of the tensors copied byte for byte (unchanged values, or no parameter)."""
    retyped: dict[str, str] = field(default_factory=dict)
    """Tensors written in another type than the original's, GGUF name → ``"Q4_1→F32"``
    (``tensor_type`` asked for it, or the gguf package cannot quantize to the original type)."""


TENSOR_TYPES = ("F16", "F32")
"""What ``write_gguf(tensor_type=...)`` takes besides ``None`` (each tensor's original type)."""


def write_gguf(
    model: Any, *, original: str | Path, out: str | Path, tensor_type: str | None = None
) -> WrittenGGUF:
    """Write ``model``'s weights (a transformers causal LM loaded from ``original`` with
    ``gguf_file=``, possibly trained since) as a new GGUF file ``out`` with the original's
    metadata and tokenizer. An updated tensor gets the original's type (``tensor_type=None``)
    or ``"F16"``/``"F32"`` (1-D ones F32); an unchanged one keeps its original bytes."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, Keys, quants

    if tensor_type is not None and tensor_type not in TENSOR_TYPES:
        raise ValueError(
            f"tensor_type={tensor_type!r}: use None (each tensor's original type), "
            + " or ".join(repr(t) for t in TENSOR_TYPES)
        )
    original, out = Path(original), Path(out)
    if out.resolve() == original.resolve():
        raise ValueError(
            f"out is the original file {original}; the original is read while the new one is "
            "written: give another path"
        )
    reader = GGUFReader(original)
    arch_field = reader.fields.get(Keys.General.ARCHITECTURE)
    if arch_field is None:
        raise ValueError(
            f"{original} has no {Keys.General.ARCHITECTURE} field; is it a GGUF model?"
        )
    arch = str(arch_field.contents())
    names = _gguf_to_hf_names(model, arch)
    permuted = _permuted_heads(model) if arch == "llama" else {}
    state = model.state_dict()

    writer = GGUFWriter(out, arch, endianess=reader.endianess)
    for f in reader.fields.values():
        # the architecture and the GGUF.* header fields are written by GGUFWriter itself
        if f.name == Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue
        kind = f.types[0]
        sub = f.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, f.contents(), kind, sub_type=sub)

    written = WrittenGGUF(path=out, tensors=len(reader.tensors))
    datas: list[Any] = []
    for tensor in reader.tensors:
        hf_name = names.get(tensor.name)
        data, qtype = tensor.data, tensor.tensor_type
        if hf_name is not None and hf_name in state:
            values = state[hf_name].detach().to("cpu").float().numpy()
            heads = next((n for part, n in permuted.items() if part in tensor.name), None)
            if heads is not None:
                values = _permute(values, heads)
            before = quants.dequantize(tensor.data, tensor.tensor_type).reshape(values.shape)
            if np.array_equal(values, before):
                written.kept.append(tensor.name)
            else:
                want = tensor.tensor_type
                if tensor_type is not None:
                    want = GGMLQuantizationType[tensor_type if values.ndim > 1 else "F32"]
                data, qtype = _quantize(values, want, quants, GGMLQuantizationType)
                if qtype != tensor.tensor_type:
                    written.retyped[tensor.name] = f"{tensor.tensor_type.name}→{qtype.name}"
                written.updated.append(tensor.name)
        else:
            written.kept.append(tensor.name)
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, qtype)
        datas.append(data)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in datas:
        writer.write_tensor_data(data, tensor_endianess=reader.endianess)
    writer.close()
    return written


def _gguf_to_hf_names(model: Any, arch: str) -> dict[str, str]:
    """GGUF tensor name → the model's parameter name, as transformers maps them when it loads
    a GGUF file (``get_gguf_hf_weights_map``): gguf's name map for the architecture applied to
    each parameter's name, or, when the whole name has no GGUF name, to the part after a
    module's prefix (shortest prefix first), the first name found kept. The map is built once
    here; transformers' own function rebuilds it for each of the model's modules."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor

    processor_class = TENSOR_PROCESSORS.get(arch, TensorProcessor)
    if processor_class.__name__ not in _IDENTITY_PROCESSORS:
        raise NotImplementedError(
            f"writing a {arch!r} GGUF is not supported: transformers loads it with "
            f"{processor_class.__name__}, whose tensor reshaping this module does not invert; "
            "llama-family models (SmolLM2, Llama, Mistral) are"
        )
    found = [key for key, value in MODEL_ARCH_NAMES.items() if value == arch]
    if not found:
        raise NotImplementedError(f"the gguf package does not know the architecture {arch!r}")
    name_map = get_tensor_name_map(found[0], int(model.config.num_hidden_layers))
    parts = {hf_name: hf_name.split(".") for hf_name in model.state_dict()}
    mapped: dict[str, str] = {}
    for depth in range(max((len(p) for p in parts.values()), default=0)):
        for hf_name, split in parts.items():
            if depth >= len(split) - 1:
                continue
            rest = ".".join(split[depth:])
            name, suffix = rest, ""
            if rest.endswith((".weight", ".bias")):
                name, tail = rest.rsplit(".", 1)
                suffix = "." + tail
            gguf_name = name_map.get_name(name)
            if gguf_name is not None:
                mapped.setdefault(gguf_name + suffix, hf_name)
    return mapped


def _permuted_heads(model: Any) -> dict[str, int]:
    """The llama family's permuted projections (by GGUF name part) and their head counts."""
    config = model.config
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    return {".attn_q.": heads, ".attn_k.": kv_heads}


def _permute(weights: Any, n_head: int) -> Any:
    """llama.cpp's converter's permutation of a query/key projection's rows: within each head,
    the rows of the two rotary halves are interleaved. The inverse of transformers'
    ``LlamaTensorProcessor._reverse_permute_weights``."""
    dim = weights.shape[0] // n_head // 2
    return weights.reshape(n_head, 2, dim, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _quantize(values: Any, qtype: Any, quants: Any, types: Any) -> tuple[Any, Any]:
    """``values`` in ``qtype``, or in F32 (1-D) / F16 where the gguf package cannot."""
    try:
        return quants.quantize(values, qtype), qtype
    except (NotImplementedError, quants.QuantError):
        fallback = types.F32 if values.ndim == 1 else types.F16
        return quants.quantize(values, fallback), fallback
