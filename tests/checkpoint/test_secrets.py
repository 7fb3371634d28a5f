"""Secrets in configs and metadata never reach the database file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aworld_graph.checkpoint import TrajectorySaver, strip_secrets

from .conftest import chat_graph

SECRETS = [
    "sk-proj-SECRETKEY1234567890abcdef",
    "llm-key-SECRET-0987654321",
    "Bearer SECRET-bearer-token-value",
    "SECRET-mcp-env-value",
    "SECRET-refresh-token",
    "SECRET-password-hunter2",
]


def _raw_bytes(path: Path) -> bytes:
    """Every byte SQLite wrote: the main file and any write-ahead log."""
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_secrets_in_config_and_metadata_are_not_written(db_path: Path) -> None:
    saver = TrajectorySaver(db_path)
    app = chat_graph(saver)
    config = {
        "configurable": {
            "thread_id": "secret-thread",
            "api_key": SECRETS[0],
            "llm_api_key": SECRETS[1],
            "Authorization": SECRETS[2],
            "note": SECRETS[2],  # a bearer credential under an innocent key
            "mcp_config": {
                "mcpServers": {"fs": {"command": "npx", "args": ["x"], "env": {"K": SECRETS[3]}}}
            },
            "user": "alice",
            "max_tokens": 256,
        },
        "metadata": {
            "refresh_token": SECRETS[4],
            "db_password": SECRETS[5],
            "headers": {"authorization": SECRETS[2]},
            "team": "blue",
        },
    }
    app.invoke({"messages": [{"role": "user", "content": "hi"}], "turn": 0}, config)
    app.update_state(config, {"turn": 5})
    saver.close()

    raw = _raw_bytes(db_path)
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
    assert b"SECRET" not in raw
    with sqlite3.connect(db_path) as conn:
        metadata = conn.execute("SELECT metadata FROM checkpoints LIMIT 1").fetchone()[0]
    assert '"user":"alice"' in metadata and '"max_tokens":256' in metadata
    assert '"team":"blue"' in metadata


def test_strip_secrets_keeps_usage_counters() -> None:
    record = {
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        "max_tokens": 10,
        "access_token": "x",
        "id_token": "x",
        "client_secret": "x",
        "OPENAI_API_KEY": "x",
        "X-Api-Key": "x",
        "Authorization": "x",
        "server": {"url": "http://mcp", "env": {"A": "b"}, "headers": {"Authorization": "x"}},
        "list": [{"password": "x", "keep": 1}],
        "text": "sk-abcdefghijklmnopqrstuv",
    }
    assert strip_secrets(record) == {
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        "max_tokens": 10,
        "server": {"url": "http://mcp", "headers": {}},
        "list": [{"keep": 1}],
        "text": "[redacted]",
    }


@pytest.mark.parametrize("key", ["api_key", "apiKey", "api-key", "token", "auth_token"])
def test_secret_key_spellings(key: str) -> None:
    assert strip_secrets({key: "v", "keep": 1}) == {"keep": 1}
