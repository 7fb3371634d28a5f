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
