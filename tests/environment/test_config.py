"""Parsing the mcpServers config: forms, inference, ${VAR}, errors, hidden secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aworld_graph.environment import HttpServerConfig, Sandbox, StdioServerConfig, load_mcp_config
from aworld_graph.errors import ConfigError

from .conftest import SECRET_ENV, SECRET_TOKEN, no_secret

SEED_LIKE = {
    "mcpServers": {
        "gaia_server": {
            "type": "streamable-http",
            "url": "https://playground.example.com/environments/mcp",
            "timeout": 600,
            "sse_read_timeout": 600,
            "headers": {"ENV_CODE": "gaia", "Authorization": "Bearer ${AWORLD_GRAPH_TEST_TOKEN}"},
        },
        "local": {
            "command": "python",
            "args": ["-m", "x"],
            "env": {"KEY": SECRET_ENV, "PORT": 8080},
        },
        "legacy": {"url": "http://127.0.0.1:9/sse"},
        "modern": {"url": "http://127.0.0.1:9/mcp"},
        "aliased": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
    }
}


def test_kinds_are_inferred_and_vars_substituted() -> None:
    config = load_mcp_config(SEED_LIKE)
    gaia = config.servers["gaia_server"]
    assert isinstance(gaia, HttpServerConfig)
    assert gaia.headers["Authorization"] == f"Bearer {SECRET_TOKEN}"
    assert (gaia.timeout, gaia.sse_read_timeout, gaia.call_timeout) == (600, 600, 600)
    local = config.servers["local"]
    assert isinstance(local, StdioServerConfig) and local.env["PORT"] == "8080"
    kinds = {name: server.type for name, server in config.servers.items()}
    assert kinds == {
        "gaia_server": "streamable-http",
        "local": "stdio",
        "legacy": "sse",
        "modern": "streamable-http",
        "aliased": "streamable-http",
    }


def test_default_substitution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWG_UNSET_VAR", raising=False)
    config = load_mcp_config({"mcpServers": {"s": {"command": "${AWG_UNSET_VAR:-python3}"}}})
    assert config.servers["s"].command == "python3"  # type: ignore[union-attr]


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_file_paths(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"mcp{suffix}"
    path.write_text(json.dumps(SEED_LIKE))  # JSON is valid YAML too
    assert list(load_mcp_config(path).servers) == list(SEED_LIKE["mcpServers"])
    assert load_mcp_config(str(path)).servers["local"].type == "stdio"


def test_reprs_hide_env_headers_and_url_credentials() -> None:
    config = load_mcp_config(
        {
            "mcpServers": {
                **SEED_LIKE["mcpServers"],
                "u": {"url": "https://me:pw-secret@h/mcp?key=k-secret"},
            }
        }
    )
    sandbox = Sandbox(mcp_config=config)
    for text in (repr(config), str(config), repr(sandbox), repr(config.servers["gaia_server"])):
        no_secret(text)
        assert "pw-secret" not in text and "k-secret" not in text
    assert "'Authorization': '***'" in repr(config.servers["gaia_server"])


def test_all_problems_reported_at_once_naming_server_and_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWG_MISSING", raising=False)
    bad = {
        "mcpServers": {
            "empty": {},
            "mixed": {"type": "stdio", "command": "x", "url": "http://h/mcp"},
            "typo": {"comand": "python"},
            "weird": {"type": "carrier-pigeon"},
            "unset": {"command": "python", "env": {"K": "${AWG_MISSING}"}},
            "neg": {"command": "python", "timeout": -1},
            "ftp": {"url": "ftp://h/x", "headers": {"Authorization": SECRET_TOKEN, "X": ["no"]}},
        }
    }
    with pytest.raises(ConfigError) as info:
        load_mcp_config(bad)
    message = str(info.value)
    no_secret(message)
    for expected in (
        "mcpServers.empty: neither 'command' nor 'url'",
        "mcpServers.mixed.url: not used by stdio servers",
        "mcpServers.typo: neither 'command' nor 'url'",
        "mcpServers.weird.type: unknown transport",
        "mcpServers.unset.env.K: environment variable AWG_MISSING is not set",
        "mcpServers.neg.timeout",
        "mcpServers.ftp.url: ",
        "mcpServers.ftp.headers.X",
    ):
        assert expected in message


def test_unknown_field_is_named_with_the_fix() -> None:
    with pytest.raises(
        ConfigError, match=r"mcpServers\.s\.comand: unknown field; remove it or fix its spelling"
    ):
        load_mcp_config({"mcpServers": {"s": {"command": "python", "comand": "x"}}})


@pytest.mark.parametrize(
    ("source", "pattern"),
    [
        ({"servers": {}}, "no 'mcpServers' mapping"),
        (["x"], "expected a mapping"),
        ("/no/such/mcp.json", "does not exist"),
    ],
)
def test_bad_sources(source: object, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_mcp_config(source)  # type: ignore[arg-type]


def test_bad_file_syntax(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {')
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_mcp_config(path)


def test_server_selection() -> None:
    config = {"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": True}}}
    assert Sandbox(mcp_config=config).mcpservers.names == ["a"]
    assert Sandbox(mcp_config=config, mcp_servers=["b", "a"]).mcpservers.names == ["b", "a"]
    with pytest.raises(ConfigError, match="mcp_servers names 'c', which is not in mcpServers"):
        Sandbox(mcp_config=config, mcp_servers=["c"])
    with pytest.raises(ConfigError, match="without mcp_config"):
        Sandbox(mcp_servers=["a"])
    assert Sandbox().mcpservers.names == []
