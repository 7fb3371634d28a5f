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


def test_the_quick_scan_flags_everything_strip_secrets_would_change() -> None:
    import json

    from aworld_graph.secrets import may_hold_secrets

    changed = [
        {"api_key": "x"},
        {"LLM-API-KEY": "x"},
        {"Authorization": "x"},
        {"access_token": "x"},
        {"client_secret": "x"},
        {"password": "x"},
        {"credentials": {"a": 1}},
        {"servers": {"s": {"command": "x", "env": {"A": "b"}}}},
        {"note": "Bearer abcdefgh12345678"},
        {"note": "Basic dXNlcjpwYXNzd29yZA=="},
        {"k": "sk-" + "a" * 20},
        {"k": "ghp_" + "a" * 30},
        {"k": "github_pat_" + "a" * 30},
        {"k": "xoxb-1234567890"},
        {"k": "AKIAABCDEFGHIJKLMNOP"},
    ]
    for value in changed:
        assert strip_secrets(value) != value, value
        assert may_hold_secrets(json.dumps(value)), value
    for value in ({"source": "loop", "step": 3, "parents": {}}, {"role": "tool", "content": "42"}):
        assert strip_secrets(value) == value and not may_hold_secrets(json.dumps(value))
