"""A real training step, offline: a tiny causal LM built from a config, a tokenizer trained on
the exported text, TRL's SFTTrainer on the exported SFT file, DPOTrainer on the exported
preference pairs, and GRPOTrainer on the exported prompt + reward rows with the project's
reward functions. Needs the ``train`` extra (torch CPU, transformers, trl, datasets)."""

from __future__ import annotations

import copy
import importlib.util
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aworld_graph.export import export
from aworld_graph.rewards import as_trl_reward, numeric

_NEEDED = ("torch", "transformers", "trl", "datasets", "tokenizers")
if any(importlib.util.find_spec(name) is None for name in _NEEDED):
    if os.environ.get("CI"):
        raise RuntimeError(
            "CI must run the training tests: install the `train` extra (see tests/setup.sh)"
        )
    pytest.skip("the `train` extra is not installed", allow_module_level=True)

import torch  # noqa: E402
from datasets import Dataset, load_dataset  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::FutureWarning"),  # transformers' renamed arguments
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),  # e.g. "no GPU", padding notices
]

SPECIAL = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|call|>"]
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] %}{{ m['content'] }}{% endif %}"
    "{% for c in m['tool_calls'] or [] %}<|call|>{{ c['function']['name'] }} "
    "{{ c['function']['arguments'] }}{% endfor %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def data(runs_db: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The exported training files."""
    folder = tmp_path_factory.mktemp("train")
    files = {
        "sft": folder / "sft.jsonl",
        "dpo": folder / "dpo.jsonl",
        "reward": folder / "reward.jsonl",
    }
    assert export("trl-sft", files["sft"], db=runs_db, per="turn").rows >= 8
    assert export("trl-dpo", files["dpo"], db=runs_db).rows == 1
    assert export("trl-reward", files["reward"], db=runs_db).rows >= 3
    return files


@pytest.fixture(scope="module")
def tokenizer(data: dict[str, Path]) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the exported text (nothing downloaded)."""

    def lines() -> Iterator[str]:
        for path in data.values():
            yield from path.read_text().splitlines()

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        lines(),
        trainers.BpeTrainer(
            vocab_size=320,
            special_tokens=SPECIAL,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<|pad|>", eos_token="<|end|>")
    tok.chat_template = TEMPLATE
    return tok


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    torch.manual_seed(0)
    torch.set_num_threads(2)


def tiny_model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config)


def common(tmp_path: Path) -> dict[str, Any]:
    return {
        "output_dir": str(tmp_path / "out"),
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "use_cpu": True,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }


def snapshot(model: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def changed(model: Any, before: dict[str, torch.Tensor]) -> int:
    return sum(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def losses(trainer: Any) -> list[float]:
    return [float(entry["loss"]) for entry in trainer.state.log_history if "loss" in entry]


def test_sft_trainer_learns_from_the_exported_sft_file(
    data: dict[str, Path], tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    from trl import SFTConfig, SFTTrainer

    dataset = load_dataset("json", data_files=str(data["sft"]), split="train")
    assert {"messages", "tools"} <= set(dataset.column_names)
    model = tiny_model(tokenizer)
    before = snapshot(model)
    args = SFTConfig(max_steps=2, per_device_train_batch_size=2, max_length=512, **common(tmp_path))
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    seen = losses(trainer)
    assert len(seen) == 2 and all(math.isfinite(x) and x > 0 for x in seen)
    assert changed(model, before) == len(before)


def test_dpo_trainer_steps_on_the_exported_preference_pairs(
    data: dict[str, Path], tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    from trl import DPOConfig, DPOTrainer

    dataset = load_dataset("json", data_files=str(data["dpo"]), split="train")
    row = dataset[0]
    assert row["score_chosen"] > row["score_rejected"]
    model = tiny_model(tokenizer)
    reference = copy.deepcopy(model).eval()
    before = snapshot(model)
    args = DPOConfig(max_steps=1, per_device_train_batch_size=1, max_length=512, **common(tmp_path))
    trainer = DPOTrainer(
        model=model,
        ref_model=reference,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    (loss,) = losses(trainer)
    assert loss == pytest.approx(math.log(2), abs=1e-3)  # policy == reference at the first step
    assert changed(model, before) == len(before)


def test_grpo_trainer_steps_with_the_projects_reward_functions(
    data: dict[str, Path], tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    from trl import GRPOConfig, GRPOTrainer

    rows = load_dataset("json", data_files=str(data["reward"]), split="train")
    dataset = Dataset.from_dict({"prompt": rows["prompt"], "ground_truth": rows["ground_truth"]})

    def length_shaped(answer: str | None, expected: Any) -> float:  # a user callable
        return (len(answer or "") % 7) / 6

    model = tiny_model(tokenizer)
    before = snapshot(model)
    args = GRPOConfig(
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=12,
        **{**common(tmp_path), "learning_rate": 1e-2},
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[as_trl_reward(numeric), as_trl_reward(length_shaped)],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    (loss,) = losses(trainer)
    logged = trainer.state.log_history[0]
    assert math.isfinite(loss)
    assert "rewards/aworld_numeric/mean" in logged and logged["reward_std"] > 0
    assert changed(model, before) > 0
