"""Experience → training samples: exporters over the checkpoint database.

>>> from aworld_graph.export import RunFilter, export
>>> export("openai", "sft.jsonl", db="checkpoints/aworld.db",
...        filter=RunFilter(success_only=True, min_reward=1.0))          # doctest: +SKIP

Runs are read from the database (one thread, a filter, or everything) – see
:mod:`.runs`; chat samples are rebuilt from the stored messages and trace records (system
prompts and offered tools included) – see :mod:`._chat`; the formats are listed in
:mod:`.formats`; OpenAI samples are checked by :func:`validate_openai`. Secrets never reach
an export: every row passes :func:`~aworld_graph.checkpoint.strip_secrets`.
"""

from __future__ import annotations

from ._chat import ChatSample, chat_samples
from .formats import (
    FORMATS,
    aworld_rows,
    openai_rows,
    sharegpt_rows,
    trl_dpo_rows,
    trl_reward_rows,
    trl_sft_rows,
    verl_rows,
)
from .runs import Run, RunFilter, iter_runs, list_threads, load_run
from .validate import validate_openai, validate_openai_file
from .writer import ExportReport, export, write_rows

__all__ = [
    "FORMATS",
    "ChatSample",
    "ExportReport",
    "Run",
    "RunFilter",
    "aworld_rows",
    "chat_samples",
    "export",
    "iter_runs",
    "list_threads",
    "load_run",
    "openai_rows",
    "sharegpt_rows",
    "trl_dpo_rows",
    "trl_reward_rows",
    "trl_sft_rows",
    "validate_openai",
    "validate_openai_file",
    "verl_rows",
    "write_rows",
]
