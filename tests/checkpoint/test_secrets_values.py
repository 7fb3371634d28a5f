"""Credential-shaped substrings are removed from any text, keeping the rest readable."""

from __future__ import annotations

from aworld_graph.checkpoint import strip_secrets


def test_credentials_inside_text_are_redacted_and_the_rest_kept() -> None:
    value = {
        "note": 'curl -H "Authorization: Bearer abcdef1234567890" https://x',
        "gh": "token ghp_" + "a" * 36,
        "slack": "xoxb-1234567890-abcdef",
        "aws": "key AKIAABCDEFGHIJKLMNOP here",
        "usage": {"prompt_tokens": 3, "max_tokens": 9},
        "plain": "bears are basic animals",
    }
    out = strip_secrets(value)
    assert out["note"] == 'curl -H "Authorization: [redacted]" https://x'
    assert "ghp_" not in out["gh"] and out["gh"].startswith("token ")
    assert out["slack"] == "[redacted]" and out["aws"] == "key [redacted] here"
    assert out["usage"] == {"prompt_tokens": 3, "max_tokens": 9}
    assert out["plain"] == "bears are basic animals"


def test_listed_values_decode_on_first_use_and_behave_as_dicts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import copy
    import json

    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from aworld_graph.checkpoint import TrajectorySaver
    from aworld_graph.checkpoint._read import LazyValues

    class S(TypedDict):
        n: int

    g = StateGraph(S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    saver = TrajectorySaver(tmp_path / "lazy.db")
    g.compile(checkpointer=saver).invoke({"n": 1}, {"configurable": {"thread_id": "t"}})
    latest, *_ = list(saver.list({"configurable": {"thread_id": "t"}}))
    values = latest.checkpoint["channel_values"]
    assert isinstance(values, LazyValues)
    assert values == {"n": 2} and {"n": 2} == values and dict(values) == {"n": 2}
    assert json.loads(json.dumps(values)) == {"n": 2}
    assert copy.deepcopy(values) == {"n": 2} and values.copy() == {"n": 2}
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["channel_values"] == {"n": 2}
