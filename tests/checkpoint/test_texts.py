"""A long model answer is stored once per thread, though it sits in four channels, each as a
write and as a value; it reads back whole, and retention keeps exactly the texts still used."""

from __future__ import annotations

from typing import Any

import pytest

from aworld_graph import Agent, Runners
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.testing import ScriptedModel

from .conftest import execute

ANSWER = "".join(chr(0x61 + (i * 7919) % 26) for i in range(300_000)) + " – fin ✓"
"""Long, not repetitive (a compressing store would hide copies), with non-ASCII text."""


def _run(saver: TrajectorySaver, thread: str, answer: str = ANSWER) -> Any:
    agent = Agent(name="a", model=ScriptedModel([answer]))
    return Runners.sync_run("write it out", agent=agent, task_id=thread, checkpointer=saver)


def _stored_bytes(target: str) -> int:
    """Bytes of every stored value, write, text and trajectory ``changes``."""
    size = (
        "octet_length({}::text)" if target.startswith("postgresql") else "length(CAST({} AS BLOB))"
    )
    total = 0
    for table, column in [
        ("checkpoint_blobs", "value"),
        ("checkpoint_writes", "value"),
        ("checkpoint_texts", "text"),
        ("checkpoints", "changes"),
    ]:
        (n,) = execute(target, f"SELECT sum({size.format(column)}) FROM {table}")[0]
        total += int(n or 0)
    return total


def _texts(target: str) -> int:
    return int(execute(target, "SELECT count(*) FROM checkpoint_texts")[0][0])


def test_a_long_answer_is_stored_once_and_reads_back_whole(target: str) -> None:
    with TrajectorySaver(target) as saver:
        response = _run(saver, "long")
        assert response.answer == ANSWER
    assert _texts(target) == 1
    assert _stored_bytes(target) < 1.2 * len(ANSWER.encode())  # once, not 8 times
    with TrajectorySaver(target) as saver:  # a new saver reads it back in every way
        latest = saver.get_tuple({"configurable": {"thread_id": "long"}})
        assert latest is not None
        values = latest.checkpoint["channel_values"]
        assert values["answer"] == ANSWER and values["messages"][-1]["content"] == ANSWER
        every = list(saver.list({"configurable": {"thread_id": "long"}}))
        writes = [w[2] for t in every for w in t.pending_writes or [] if w[1] == "answer"]
        assert writes == [ANSWER]
        again = _run(saver, "long")  # a finished run is read back
        assert again.answer == ANSWER and again.trajectory[-1]["action"]["content"] == ANSWER


def test_short_values_stay_inline(target: str) -> None:
    with TrajectorySaver(target) as saver:
        assert _run(saver, "short", "four").answer == "four"
    assert _texts(target) == 0


def test_retention_keeps_the_texts_still_used_and_drops_the_rest(target: str) -> None:
    other = ANSWER[::-1]
    with TrajectorySaver(target) as saver:
        _run(saver, "one")
        _run(saver, "two", other)
        saver.copy_thread("one", "copy")
        saver.delete_thread("one")
        assert _texts(target) == 2  # the copy has its own row of the first text
        copied = saver.get_tuple({"configurable": {"thread_id": "copy"}})
        assert copied is not None and copied.checkpoint["channel_values"]["answer"] == ANSWER
        saver.prune(["two"], strategy="keep_latest")
        latest = saver.get_tuple({"configurable": {"thread_id": "two"}})
        assert latest is not None and latest.checkpoint["channel_values"]["answer"] == other
        assert _texts(target) == 2  # the latest checkpoint still needs it
        saver.delete_thread("two")
        saver.delete_thread("copy")
        assert _texts(target) == 0


@pytest.mark.parametrize("where", ["blob", "write"])
def test_a_missing_text_is_named_not_mistaken_for_data(target: str, where: str) -> None:
    from aworld_graph.errors import RuntimeFailure

    with TrajectorySaver(target) as saver:
        _run(saver, "long")
    execute(target, "DELETE FROM checkpoint_texts")
    with TrajectorySaver(target) as saver, pytest.raises(RuntimeFailure, match="stored text"):
        if where == "blob":
            saver.get_tuple({"configurable": {"thread_id": "long"}})
        else:
            list(saver.list({"configurable": {"thread_id": "long"}}))
