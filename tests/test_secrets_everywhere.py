"""Configured secrets and secret-named tool arguments are scrubbed at every exit: stored
errors, CLI output, logs, every export format and the trajectory view (issue 22)."""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from aworld_graph import Agent, Runners, tool
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main
from aworld_graph.environment import load_mcp_config
from aworld_graph.export import FORMATS, export
from aworld_graph.secrets import (
    REDACTED,
    may_hold_secrets,
    register_secret,
    scrub_text,
    strip_secrets,
)
from aworld_graph.testing import ScriptedModel, tool_call
from tests.fake_openai import FakeOpenAI, status


def _raw(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


@pytest.mark.parametrize(
    "secret",
    [
        "plain-key-ABCDEF0123456789",  # no known credential shape: only the registry knows it
        "p@ss.w*rd+(12)[34]?",  # regex metacharacters
        "Key With Spaces 12345",
        "sk-looks-like-openai-0123456789",
    ],
)
def test_a_registered_value_is_replaced_in_every_text(secret: str) -> None:
    register_secret(secret)
    text = f"error: Incorrect API key provided: {secret}."
    assert scrub_text(text) == f"error: Incorrect API key provided: {REDACTED}."
    nested = {"a": [text, {"b": (text,)}], "n": 3}
    assert secret not in json.dumps(strip_secrets(nested))
    assert may_hold_secrets(json.dumps({"note": text}))


def test_only_credential_like_config_values_are_registered() -> None:
    register_secret("short")  # under 8 characters: never registered
    register_secret("/usr/local/lib/python3", "PYTHONPATH")  # a path under an innocent name
    register_secret("verbose-logging", "LOG_MODE")  # a word, not token-shaped
    register_secret("hunter2-db-pass", "DB_PASSWORD")  # a credential name
    register_secret("a1b2c3d4e5f6g7h8i9j0", "SESSION")  # token-shaped under any name
    register_secret("Bearer tkn-0f9e8d7c6b5a4321", "X-Custom")  # a bearer token
    text = (
        "short /usr/local/lib/python3 verbose-logging hunter2-db-pass a1b2c3d4e5f6g7h8i9j0 "
        "tkn-0f9e8d7c6b5a4321"
    )
    assert scrub_text(text) == (
        f"short /usr/local/lib/python3 verbose-logging {REDACTED} {REDACTED} {REDACTED}"
    )


def test_an_mcp_config_registers_its_header_and_env_secrets() -> None:
    config = load_mcp_config(
        {
            "mcpServers": {
                "web": {
                    "type": "streamable-http",
                    "url": "http://user:urlpass-0123@127.0.0.1:9/mcp",
                    "headers": {"Authorization": "Bearer hdr-token-abcdef12", "Accept": "text/x"},
                },
                "local": {"command": "x", "env": {"API_TOKEN": "env-secret-98765", "LANG": "C"}},
            }
        }
    )
    config.register_secrets()
    text = "hdr-token-abcdef12 env-secret-98765 urlpass-0123 text/x"
    assert scrub_text(text) == f"{REDACTED} {REDACTED} {REDACTED} text/x"


@pytest.mark.parametrize(
    ("arguments", "kept"),
    [
        ('{"user": "ada", "password": "hunter2"}', {"user": "ada"}),
        ('{"q": {"api_key": "x", "n": 1}}', {"q": {"n": 1}}),
        ('[{"token": "t"}, {"page": 2}]', [{}, {"page": 2}]),
        ('{"user": "ada"}', {"user": "ada"}),
    ],
)
def test_tool_call_arguments_follow_the_key_rule(arguments: str, kept: object) -> None:
    call = {"id": "c1", "function": {"name": "login", "arguments": arguments}}
    out = strip_secrets({"tool_calls": [call]})
    assert json.loads(out["tool_calls"][0]["function"]["arguments"]) == kept
    assert out["tool_calls"][0]["function"]["name"] == "login"


def test_arguments_that_are_not_json_objects_are_kept_scrubbed() -> None:
    assert strip_secrets({"arguments": "{not json"}) == {"arguments": "{not json"}
    assert strip_secrets({"arguments": '"just text"'}) == {"arguments": '"just text"'}
    assert strip_secrets({"arguments": "Bearer abcdefgh12345678"}) == {"arguments": REDACTED}


@tool
def login(user: str, password: str) -> str:
    """Log a user in."""
    return f"welcome {user}"


@pytest.fixture
def login_db(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    agent = Agent(
        name="gate",
        tools=[login],
        model=ScriptedModel(
            [tool_call("login", {"user": "ada", "password": "pw-hunter2-xyz"}, id="c1"), "In."]
        ),
    )
    saver = TrajectorySaver(db)
    Runners.sync_run(input="log in", agent=agent, task_id="login", checkpointer=saver)
    saver.close()
    return db


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_no_export_keeps_a_secret_named_tool_argument(
    login_db: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / ("out.parquet" if fmt == "verl" else "out.jsonl")
    report = export(fmt, out, db=login_db)
    assert report.rows == 0 or b"pw-hunter2-xyz" not in out.read_bytes()


def test_the_aworld_export_keeps_the_other_arguments(login_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    export("aworld", out, db=login_db)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    calls = [c for r in rows for c in r["action"]["tool_calls"]]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"user": "ada"}]
    outputs = [o for r in rows for o in r["reward"]["tool_outputs"]]
    assert outputs and all("pw-hunter2-xyz" not in json.dumps(o) for o in outputs)


def test_the_trajectory_view_changes_have_no_secret_argument(login_db: Path) -> None:
    with sqlite3.connect(login_db) as conn:
        changes = [row[0] or "" for row in conn.execute("SELECT changes FROM trajectory")]
    assert any("login" in c for c in changes)
    assert not any("pw-hunter2-xyz" in c for c in changes)


KEYS = ["plain-llm-key-0123456789ABCDEF", "sk-proj-echoed0123456789abcdef"]


@pytest.mark.parametrize("key", KEYS)
def test_an_endpoint_echoing_the_key_leaks_it_nowhere(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_db: Path
) -> None:
    (tmp_path / "echo_app.py").write_text(
        "from aworld_graph import Agent\nagent = Agent(name='helper')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with FakeOpenAI() as server:
        echo = status(401, message=f"Incorrect API key provided: Bearer {key} ({key})")
        server.add(echo, echo)
        monkeypatch.setenv("LLM_BASE_URL", server.url)
        monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
        monkeypatch.setenv("LLM_API_KEY", key)
        result = CliRunner().invoke(main, ["run", "echo_app:agent", "--input", "hi"])
        as_json = CliRunner().invoke(main, ["run", "echo_app:agent", "-i", "hi", "--json"])
    assert result.exit_code == 1 and "HTTP 401" in result.output, result.output
    assert key not in result.output and key not in as_json.output
    assert "Traceback" not in result.output
    assert _isolated_db.exists() and key.encode() not in _raw(_isolated_db)
    with sqlite3.connect(_isolated_db) as conn:
        errors = [r[0] for r in conn.execute("SELECT error FROM trajectory") if r[0]]
    assert errors and all("HTTP 401" in e for e in errors)
    sys.modules.pop("echo_app", None)


def test_cli_logs_are_one_scrubbed_line(monkeypatch: pytest.MonkeyPatch) -> None:
    register_secret("log-secret-0123456789")
    import click

    @main.command("_log_probe", hidden=True)
    def probe() -> None:
        try:
            raise ValueError("boom log-secret-0123456789")
        except ValueError:
            logging.getLogger("some.library").exception("failed with log-secret-0123456789")
        click.echo("out log-secret-0123456789")

    try:
        result = CliRunner().invoke(main, ["_log_probe"])
    finally:
        main.commands.pop("_log_probe")
    assert result.exit_code == 0, result.output
    assert "log-secret-0123456789" not in result.output
    assert "error: failed with [redacted]" in result.output
    assert "Traceback" not in result.output and "out [redacted]" in result.output


@pytest.mark.parametrize(
    "name", ["aworld_graph.environment._connection", "mcp.client.stdio", "openai"]
)
def test_library_log_records_are_scrubbed_whatever_the_handler(name: str) -> None:
    """An application that logs to its own handler (no CLI) gets this library's records and
    those of the packages it drives scrubbed: message, arguments and traceback."""
    import io

    secret = "lib-log-secret-0123456789"
    register_secret(secret)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        log = logging.getLogger(name)
        log.warning("server said %s and Bearer abcdefghijklmnop", secret)
        try:
            raise RuntimeError(f"connect failed: {secret}")
        except RuntimeError:
            log.exception("call failed")
        logging.getLogger("myapp").warning("the app's own: %s", "kept as is")
    finally:
        root.removeHandler(handler)
    text = stream.getvalue()
    assert secret not in text and "abcdefghijklmnop" not in text
    assert f"{name} server said {REDACTED}" in text and "RuntimeError: connect failed" in text
    assert "myapp the app's own: kept as is" in text
