"""The embedded model's GGUF → transformers → GGUF again (:func:`write_gguf`).

Unchanged weights give back the original tensors byte for byte (names, types, the llama
query/key permutation redone exactly) and llama.cpp completes a prompt from the new file as
from the original; one changed weight lands in the new file at the place it was changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aworld_graph.local import model_path
from aworld_graph.train.gguf import write_gguf
from tests.train import gguf as loaded

pytest.importorskip("gguf")
pytest.importorskip("llama_cpp")


def greedy(path: Path) -> str:
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=128, n_threads=1, seed=0, verbose=False)
    try:
        out = llm("The capital of France is", max_tokens=8, temperature=0.0)
        return str(out["choices"][0]["text"])
    finally:
        llm.close()


@pytest.mark.local_model
def test_unchanged_then_one_changed_weight(tmp_path: Path) -> None:
    import numpy as np
    import torch
    from gguf import GGUFReader, quants
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    original = model_path()
    model = loaded.causal_lm()
    same = write_gguf(model, original=original, out=tmp_path / "same.gguf")
    assert same.updated == [] and same.retyped == {}
    src, new = loaded.original_reader(), GGUFReader(same.path)
    assert [(t.name, t.tensor_type) for t in new.tensors] == [
        (t.name, t.tensor_type) for t in src.tensors
    ]
    assert all(
        np.array_equal(a.data, b.data) for a, b in zip(src.tensors, new.tensors, strict=True)
    )
    skip = ("GGUF.", "general.architecture")
    fields = [k for k in src.fields if not k.startswith(skip)]
    assert [k for k in new.fields if not k.startswith(skip)] == fields
    assert all(new.fields[k].contents() == src.fields[k].contents() for k in fields)
    reply = greedy(original)
    assert reply.strip() and greedy(same.path) == reply

    # row 40 of layer 0's query projection is in head 0's second rotary half (head_dim 64):
    # GGUF stores it as row 1 + 2 * 8 = 17 of the head; a wrong permutation moves it
    row, col = 40, 100
    with torch.no_grad():
        q = model.model.layers[0].self_attn.q_proj.weight
        old = float(q[row, col])
        q[row, col] += 0.5
    changed = write_gguf(model, original=original, out=tmp_path / "changed.gguf")
    assert changed.updated == ["blk.0.attn_q.weight"] and changed.retyped == {}
    after = {t.name: t for t in GGUFReader(changed.path).tensors}["blk.0.attn_q.weight"]
    assert after.tensor_type.name == "Q4_1"
    heads = model.config.num_attention_heads
    values = quants.dequantize(after.data, after.tensor_type)
    as_hf = (
        LlamaTensorProcessor(config={"num_attention_heads": heads, "num_key_value_heads": heads})
        .process(values, "blk.0.attn_q.weight")
        .weights
    )
    reference = q.detach().numpy().copy()
    reference[row, col] = old  # the original weights, as transformers read them
    moved = np.abs(as_hf - reference)
    assert moved[row, col] > 0.3, "the changed weight did not reach the file"
    assert abs(as_hf[row, col] - (old + 0.5)) < 0.1
    assert np.unravel_index(np.argmax(moved), moved.shape) == (row, col)


def _as_hf(reader: Any, name: str, heads: int) -> Any:
    """Tensor ``name`` of a ``GGUFReader``'s file, de-quantized and in transformers' order."""
    from gguf import quants
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    tensor = {t.name: t for t in reader.tensors}[name]
    values = quants.dequantize(tensor.data, tensor.tensor_type)
    processor = LlamaTensorProcessor(
        config={"num_attention_heads": heads, "num_key_value_heads": heads}
    )
    return tensor.tensor_type.name, processor.process(values, name).weights


@pytest.mark.local_model
def test_a_fine_tuning_step_survives_in_float_tensors(tmp_path: Path) -> None:
    import numpy as np
    import torch
    from gguf import GGUFReader

    original = model_path()
    model = loaded.causal_lm()
    heads = model.config.num_attention_heads
    name = "blk.0.attn_q.weight"
    with torch.no_grad():
        q = model.model.layers[0].self_attn.q_proj.weight
        q[40, 100] += 1e-5  # a step of the size a learning rate of 1e-5 takes
        q[3, 7] -= 1e-5
    trained = q.detach().numpy().copy()

    as_original = write_gguf(model, original=original, out=tmp_path / "q41.gguf")
    kind, values = _as_hf(GGUFReader(as_original.path), name, heads)
    assert kind == "Q4_1" and values[40, 100] != trained[40, 100]  # 4 bits cannot hold it

    f32 = write_gguf(model, original=original, out=tmp_path / "f32.gguf", tensor_type="F32")
    assert f32.updated == [name] and f32.retyped == {name: "Q4_1→F32"}
    kind, values = _as_hf(GGUFReader(f32.path), name, heads)
    assert kind == "F32" and np.array_equal(values, trained)  # every trained value, exactly

    f16 = write_gguf(model, original=original, out=tmp_path / "f16.gguf", tensor_type="F16")
    assert f16.retyped == {name: "Q4_1→F16"}
    f16_read = GGUFReader(f16.path)
    kind, values = _as_hf(f16_read, name, heads)
    assert kind == "F16" and np.array_equal(values, trained.astype(np.float16))
    src = {t.name: t for t in loaded.original_reader().tensors}
    new = {t.name: t for t in f16_read.tensors}
    assert all(  # the tensors training did not touch keep their bytes
        np.array_equal(src[n].data, new[n].data) and src[n].tensor_type == new[n].tensor_type
        for n in src
        if n != name
    )
    assert greedy(f16.path).strip()  # llama.cpp serves a file of mixed types

    with pytest.raises(ValueError, match="tensor_type='Q8'.*'F16' or 'F32'"):
        write_gguf(model, original=original, out=tmp_path / "x.gguf", tensor_type="Q8")
