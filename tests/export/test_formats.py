"""Each exporter on runs produced by real graph runs: tool calls, handoffs, critic loops, teams."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent, Task
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.export import Run, RunFilter, chat_samples, export, validate_openai
from aworld_graph.rewards import numeric
from aworld_graph.rollout import rollout
from aworld_graph.testing import FunctionModel, tool_call
from tests.export.conftest import add


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rows_for(runs_db: Path, tmp_path: Path, fmt: str, **kwargs: Any) -> list[dict[str, Any]]:
    out = tmp_path / f"{fmt}.jsonl"
    export(fmt, out, db=runs_db, **kwargs)
    return read(out)


def test_openai_episode_samples_are_valid_and_keep_system_prompts_and_tools(
    runs_db: Path, tmp_path: Path
) -> None:
    rows = rows_for(runs_db, tmp_path, "openai", filter=RunFilter(threads=["tools"]))
    assert rows == [
        {
            "messages": [
                {"role": "system", "content": "You solve arithmetic with the add tool."},
                {"role": "user", "content": "What is 2+3?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                        },
                    ],
                },
                {"role": "tool", "content": "5", "tool_call_id": "c1"},
                {"role": "assistant", "content": "The answer is 5."},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "add",
                        "description": "Add two integers.",
                        "parameters": {
                            "properties": {
                                "a": {"title": "A", "type": "integer"},
                                "b": {"title": "B", "type": "integer"},
                            },
                            "required": ["a", "b"],
                            "type": "object",
                        },
                    },
                }
            ],
        }
    ]
    everything = rows_for(runs_db, tmp_path, "openai")
    assert everything and all(validate_openai(r) == [] for r in everything)


def test_handoff_episode_is_the_answering_agents_view_with_context_weighted_zero(
    runs_db: Path, tmp_path: Path
) -> None:
    (row,) = rows_for(runs_db, tmp_path, "openai", filter=RunFilter(threads=["handoff"]))
    roles = [(m["role"], m.get("weight", 1)) for m in row["messages"]]
    assert roles == [
        ("system", 1),
        ("user", 1),
        ("assistant", 1),
        ("tool", 1),
        ("tool", 1),
        ("assistant", 0),
        ("tool", 1),
        ("assistant", 1),
    ]
    assert row["messages"][0]["content"] == "You route requests."
    assert row["messages"][5]["tool_calls"][0]["function"]["name"] == "transfer_to_triage"
    assert {t["function"]["name"] for t in row["tools"]} == {
        "note",
        "transfer_to_writer",
        "transfer_to_triage",
    }
    called = {c["id"] for m in row["messages"] for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in row["messages"] if m["role"] == "tool"}
    assert called == answered == {"n1", "h1", "h2"}


def test_per_turn_samples_cover_every_agent_turn(runs_db: Path, tmp_path: Path) -> None:
    rows = rows_for(
        runs_db, tmp_path, "openai", per="turn", filter=RunFilter(threads=["handoff", "critic"])
    )
    systems = [r["messages"][0]["content"] for r in rows]
    assert systems == ["You route requests.", "You write.", "You draft texts.", "You draft texts."]
    writer = rows[1]
    assert writer["messages"][-2]["tool_calls"][0]["function"]["name"] == "transfer_to_triage"
    assert validate_openai(writer) == []
    retry = rows[3]["messages"]
    assert "Feedback from critic (score 0.2): more detail" in retry[1]["content"]
    assert retry[-1] == {"role": "assistant", "content": "the final draft"}
    only_writer = rows_for(
        runs_db, tmp_path, "openai", per="turn", filter=RunFilter(agent="writer")
    )
    assert [r["messages"][0]["content"] for r in only_writer] == ["You write."]


def test_chat_samples_mark_own_replies(runs: dict[str, Run]) -> None:
    (sample,) = chat_samples(runs["handoff"])
    assert sample.agent == "triage"
    prompt, completion = sample.split()
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert completion[0]["tool_calls"][0]["id"] == "n1"
    with pytest.raises(ValueError, match="per="):
        chat_samples(runs["tools"], per="step")


def test_sharegpt_alternates_and_carries_system_and_tools(runs_db: Path, tmp_path: Path) -> None:
    rows = rows_for(runs_db, tmp_path, "sharegpt", filter=RunFilter(threads=["tools", "handoff"]))
    tools_row, handoff_row = rows
    assert tools_row["system"] == "You solve arithmetic with the add tool."
    assert tools_row["conversations"] == [
        {"from": "human", "value": "What is 2+3?"},
        {"from": "function_call", "value": '{"name": "add", "arguments": {"a": 2, "b": 3}}'},
        {"from": "observation", "value": "5"},
        {"from": "gpt", "value": "The answer is 5."},
    ]
    assert json.loads(tools_row["tools"])[0]["name"] == "add"
    for row in rows:
        kinds = [t["from"] for t in row["conversations"]]
        assert all(k in ("human", "observation") for k in kinds[0::2])
        assert all(k in ("gpt", "function_call") for k in kinds[1::2])
    parallel = handoff_row["conversations"][1]
    assert [c["name"] for c in json.loads(parallel["value"])] == ["note", "transfer_to_writer"]
    assert json.loads(handoff_row["conversations"][2]["value"]) == [
        "noted",
        "Transferred to writer.",
    ]


def test_trl_sft_rows_name_tool_messages_and_encode_tools_as_json(
    runs_db: Path, tmp_path: Path
) -> None:
    (row,) = rows_for(runs_db, tmp_path, "trl-sft", filter=RunFilter(threads=["tools"]))
    assert set(row) == {"messages", "tools"}
    tool_message = row["messages"][3]
    assert tool_message == {"role": "tool", "content": "5", "tool_call_id": "c1", "name": "add"}
    assert json.loads(row["tools"])[0]["function"]["name"] == "add"
    (plain,) = rows_for(runs_db, tmp_path, "trl-sft", filter=RunFilter(threads=["critic"]))
    assert plain["tools"] is None


def test_trl_dpo_pairs_best_against_worst_of_a_task(runs_db: Path, tmp_path: Path) -> None:
    rows = rows_for(runs_db, tmp_path, "trl-dpo")
    assert rows == [
        {
            "prompt": [
                {"role": "system", "content": "You solve arithmetic with the add tool."},
                {"role": "user", "content": "What is 2+3?"},
            ],
            "chosen": [{"role": "assistant", "content": "It is 5."}],
            "rejected": [{"role": "assistant", "content": "It is 6."}],
            "score_chosen": 1.0,
            "score_rejected": 0.0,
            "tools": rows[0]["tools"],
        }
    ]
    assert json.loads(rows[0]["tools"])[0]["function"]["name"] == "add"


def test_trl_reward_rows_hold_prompt_completion_reward_and_ground_truth(
    runs_db: Path, tmp_path: Path
) -> None:
    rows = rows_for(runs_db, tmp_path, "trl-reward", dedup=False)
    group = [r for r in rows if r["group"] == "q"]
    assert len(group) == 4
    assert sorted(r["reward"] for r in group) == [0.0, 0.0, 1.0, 1.0]
    assert all(r["label"] == (r["reward"] == 1.0) for r in group)
    assert {r["ground_truth"] for r in group} == {"5"}
    assert all(r["completion"][0]["role"] == "assistant" for r in rows)
    critic = next(r for r in rows if r["thread_id"] == "critic")
    assert critic["reward"] == 1.0  # the critic's last score stands in when no reward_fn ran
    deduped = rows_for(runs_db, tmp_path, "trl-reward")
    assert len([r for r in deduped if r["group"] == "q"]) == 2


def test_verl_parquet_has_the_columns_verl_reads(runs_db: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "train.parquet"
    report = export("verl", out, db=runs_db, keep_unlabeled=True)
    table = pq.read_table(out)
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info"} <= set(
        table.column_names
    )
    rows = table.to_pylist()
    assert report.rows == len(rows)
    q = next(r for r in rows if r["extra_info"]["thread_id"].startswith("q."))
    assert q["prompt"] == [
        {"role": "system", "content": "You solve arithmetic with the add tool."},
        {"role": "user", "content": "What is 2+3?"},
    ]
    assert q["reward_model"] == {"style": "rule", "ground_truth": "5"}
    assert q["data_source"] == "solver"
    assert (
        len([r for r in rows if r["extra_info"]["thread_id"].startswith("q.")]) == 1
    )  # one prompt per task
    critic = next(r for r in rows if r["extra_info"]["thread_id"] == "critic")
    assert critic["prompt"][-1] == {"role": "user", "content": "Write a haiku."}


def test_aworld_items_have_state_action_reward(runs_db: Path, tmp_path: Path) -> None:
    items = rows_for(
        runs_db,
        tmp_path,
        "aworld",
        filter=RunFilter(threads=["tools", "q.r0", "q.r1", "q.r2", "q.r3"]),
    )
    tools = [i for i in items if i["meta"]["thread_id"] == "tools"]
    assert [i["id"] for i in tools] == ["tools_1", "tools_2"]
    first = tools[0]
    assert set(first) == {"id", "meta", "state", "action", "reward"}
    assert first["action"]["tool_calls"][0]["function"]["name"] == "add"
    assert first["reward"]["tool_outputs"][0]["content"] == "5"
    assert isinstance(first["meta"]["checkpoint_id"], str) and first["meta"]["checkpoint_id"]
    assert isinstance(first["meta"]["execute_time"], str)
    scored = [i for i in items if i["meta"]["thread_id"].startswith("q.")]
    assert sorted(i["reward"]["score"] for i in scored) == [0.0, 0.0, 1.0, 1.0]
    assert {i["reward"]["status"] for i in scored} == {"pass", "fail"}


def test_json_array_output(runs_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "items.json"
    report = export("aworld", out, db=runs_db, filter=RunFilter(threads=["tools"]))
    assert [i["id"] for i in json.loads(out.read_text())] == ["tools_1", "tools_2"]
    assert report.summary() == f"wrote 2 aworld rows from 1 runs to {out}"


def test_verl_leaves_out_prompts_without_ground_truth_unless_asked(
    runs_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "verl.jsonl"
    report = export("verl", out, db=runs_db)
    rows = read(out)
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["5"]
    assert report.unlabeled == 6  # tools, handoff, critic, team, failed, secret
    assert "6 prompts without ground truth left out (keep them with --keep-unlabeled)" in (
        report.summary()
    )
    kept = export("verl", out, db=runs_db, keep_unlabeled=True)
    assert kept.unlabeled == 0 and kept.rows == 7
    assert sum(r["reward_model"]["ground_truth"] is None for r in read(out)) == 6


@pytest.mark.parametrize("fmt", ["openai", "trl-sft", "sharegpt", "verl"])
def test_tool_schemas_without_secret_properties_stay_consistent(
    runs_db: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"{fmt}.jsonl"
    export(fmt, out, db=runs_db, filter=RunFilter(threads=["secret"]), keep_unlabeled=True)
    (row,) = read(out)
    tools = row.get("tools") or row.get("extra_info", {}).get("tools")
    tools = json.loads(tools) if isinstance(tools, str) else tools
    (login,) = tools
    schema = login.get("function", login)["parameters"]
    assert set(schema["properties"]) == {"user"}  # the call's arguments have no api_key either
    assert schema["required"] == ["user"]


def test_per_turn_samples_end_on_a_complete_tool_exchange(runs_db: Path, tmp_path: Path) -> None:
    rows = rows_for(runs_db, tmp_path, "trl-sft", per="turn", filter=RunFilter(agent="writer"))
    (writer,) = rows
    assert writer["messages"][-2]["tool_calls"][0]["id"] == "h2"
    assert writer["messages"][-1] == {
        "role": "tool",
        "content": "Transferred to triage.",
        "tool_call_id": "h2",
        "name": "transfer_to_triage",
    }
    (sharegpt,) = rows_for(
        runs_db, tmp_path, "sharegpt", per="turn", filter=RunFilter(agent="writer")
    )
    kinds = [t["from"] for t in sharegpt["conversations"]]
    assert kinds[-1] == "function_call" and len(kinds) % 2 == 0  # as LLaMA-Factory wants it


def test_dpo_pairs_part_where_the_calls_differ_not_where_their_ids_do(tmp_path: Path) -> None:
    answers = iter(["It is 5.", "It is 6."])

    def solve(messages: list[dict[str, Any]], tools: Any) -> Any:
        if messages[-1]["role"] == "tool":
            return next(answers)
        return tool_call("add", {"a": 2, "b": 3})  # a fresh call id each run

    agent = Agent(name="solver", system_prompt="Use add.", tools=[add], model=FunctionModel(solve))
    saver = TrajectorySaver(tmp_path / "pairs.db")
    task = Task(input="What is 2+3?", agent=agent, expected=5, id="sum")
    asyncio.run(rollout([task], n=2, reward_fn=numeric, concurrency=1, checkpointer=saver))
    saver.close()
    (row,) = rows_for(tmp_path / "pairs.db", tmp_path, "trl-dpo")
    assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant", "tool"]
    assert row["chosen"] == [{"role": "assistant", "content": "It is 5."}]
    assert row["rejected"] == [{"role": "assistant", "content": "It is 6."}]
