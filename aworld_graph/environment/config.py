"""The ``mcpServers`` configuration, as AWorld and other MCP clients write it.

>>> config = load_mcp_config({"mcpServers": {"env": {"command": "python", "args": ["-V"]}}})
>>> config.servers["env"].type
'stdio'

Three kinds of server:

* ``stdio`` – ``command``, ``args``, ``env``, ``cwd`` (``type`` may be left out when
  ``command`` is given);
* ``sse`` and ``streamable-http`` – ``url``, ``headers``, ``timeout``, ``sse_read_timeout``
  (``type`` may be left out: a ``url`` ending in ``/sse`` means SSE, any other streamable HTTP).

Every string may hold ``${VAR}`` (or ``${VAR:-default}``), replaced from the environment when
the config is loaded. A bad config raises :class:`~aworld_graph.errors.ConfigError` listing every
problem at once, each naming the server, the field and the fix – and never a value, since
``env`` and ``headers`` carry secrets. For the same reason the models' ``repr`` masks them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from ..secrets import register_secret
from .variables import substitute_vars

__all__ = [
    "HttpServerConfig",
    "McpConfig",
    "ServerConfig",
    "StdioServerConfig",
    "load_mcp_config",
]

_MASK = "***"
_TYPE_ALIASES = {
    "stdio": "stdio",
    "sse": "sse",
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamableHttp": "streamable-http",
    "http": "streamable-http",
}
_IGNORED_KEYS = frozenset({"autoApprove", "alwaysAllow", "disabledTools", "transportType"})
"""Keys other MCP clients write that mean nothing here; accepted and ignored."""


class _ServerBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The server's key in ``mcpServers``; tools are offered as ``name__tool``."""
    description: str | None = None
    """Free text, for people reading the config."""
    disabled: bool = False
    """Left out when no server list is given."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds: the default limit of one tool call (and, over HTTP, of each HTTP operation)."""
    client_session_timeout_seconds: float | None = Field(default=None, gt=0)
    """AWorld's name for the per-call limit; used when ``timeout`` is not given."""

    @property
    def call_timeout(self) -> float | None:
        """The per-call limit this server's config asks for, if any."""
        return self.timeout or self.client_session_timeout_seconds

    def secrets(self) -> set[str]:
        """Values that must never be shown (env values, header values, URL credentials)."""
        return set()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for key, value in super().__repr_args__():
            if key in ("env", "headers") and isinstance(value, Mapping):
                yield key, {k: _MASK for k in value}
            elif key == "url" and isinstance(value, str):
                yield key, safe_url(value)
            else:
                yield key, value


class StdioServerConfig(_ServerBase):
    """A server started as a child process, spoken to over its stdin/stdout."""

    type: Literal["stdio"] = "stdio"
    """Always ``stdio``."""
    command: str = Field(min_length=1)
    """The executable (looked up on ``PATH``)."""
    args: list[str] = Field(default_factory=list)
    """Its command-line arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables (secret: never shown); ``PATH``, ``HOME`` etc. are inherited."""
    cwd: str | None = None
    """Working directory of the process."""

    def secrets(self) -> set[str]:
        return {value for value in self.env.values() if len(value) >= 4}


class HttpServerConfig(_ServerBase):
    """A server reached over HTTP: ``sse`` (legacy) or ``streamable-http``."""

    type: Literal["sse", "streamable-http"]
    """Which HTTP transport the server speaks."""
    url: str
    """The MCP endpoint, e.g. ``http://127.0.0.1:8765/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every request (secret: never shown), e.g. ``Authorization``."""
    sse_read_timeout: float | None = Field(default=None, gt=0)
    """Seconds to wait for the next event on an open SSE stream."""

    @pydantic.field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL")
        return url

    def secrets(self) -> set[str]:
        found = {value for value in self.headers.values() if len(value) >= 4}
        for value in self.headers.values():  # "Bearer abc…": the token alone is secret too
            found.update(part for part in value.split() if len(part) >= 4)
        parts = urlsplit(self.url)
        if parts.password:
            found.add(parts.password)
        if parts.query:
            found.update(v for _, _, v in (p.partition("=") for p in parts.query.split("&")) if v)
        return found


ServerConfig = Annotated[StdioServerConfig | HttpServerConfig, Field(discriminator="type")]
"""One server's configuration."""


class McpConfig(BaseModel):
    """A parsed ``mcpServers`` configuration."""

    model_config = ConfigDict(frozen=True)

    servers: dict[str, ServerConfig]
    """Servers by name, in the config's order."""

    def select(
        self, names: Sequence[str] | None = None
    ) -> list[StdioServerConfig | HttpServerConfig]:
        """The servers called ``names``; all servers that are not ``disabled`` when ``None``."""
        if names is None:
            return [server for server in self.servers.values() if not server.disabled]
        if isinstance(names, str):
            names = [names]
        unknown = [name for name in names if name not in self.servers]
        if unknown:
            known = ", ".join(self.servers) or "none"
            raise ConfigError(
                f"mcp_servers names {', '.join(map(repr, unknown))}, which "
                f"{'is' if len(unknown) == 1 else 'are'} not in mcpServers (known: {known}); "
                "fix the name or add the server to the config"
            )
        return [self.servers[name] for name in dict.fromkeys(names)]

    def secrets(self) -> set[str]:
        """Every secret value of every server, for redacting messages."""
        return set().union(*(server.secrets() for server in self.servers.values()))

    def register_secrets(self) -> None:
        """Register header values, URL credentials and credential-like ``env`` values with
        :func:`~aworld_graph.secrets.register_secret`, so every text the project stores,
        prints or exports has them replaced."""
        for server in self.servers.values():
            pairs: list[tuple[str, str]] = (
                [*server.env.items()] if isinstance(server, StdioServerConfig) else []
            )
            if isinstance(server, HttpServerConfig):
                pairs = [*server.headers.items()]
                parts = urlsplit(server.url)
                if parts.password:
                    register_secret(parts.password)
            for key, value in pairs:
                register_secret(value, key)


def load_mcp_config(source: McpConfig | Mapping[str, Any] | str | os.PathLike[str]) -> McpConfig:
    """Parse an ``mcpServers`` config given as a dict, or as a JSON/YAML file path."""
    if isinstance(source, McpConfig):
        return source
    where = "mcp_config"
    if isinstance(source, str | os.PathLike):
        where = str(source)
        source = _read_file(Path(source))
    if not isinstance(source, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping with an 'mcpServers' key, got {type(source).__name__}; "
            'write it as {"mcpServers": {"name": {"command": ...}}}'
        )
    servers = source.get("mcpServers")
    if not isinstance(servers, Mapping):
        raise ConfigError(
            f"{where}: no 'mcpServers' mapping; "
            'write the servers under it: {"mcpServers": {"name": {"command": ...}}}'
        )
    problems: list[str] = []
    parsed: dict[str, StdioServerConfig | HttpServerConfig] = {}
    for name, raw in servers.items():
        server = _parse_server(str(name), raw, problems)
        if server is not None:
            parsed[str(name)] = server
    if problems:
        raise ConfigError(f"{where}: invalid MCP server config:\n  " + "\n  ".join(problems))
    return McpConfig(servers=parsed)


def _read_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"MCP config file {str(path)!r} does not exist; check the path") from None
    except OSError as exc:
        raise ConfigError(f"cannot read MCP config file {str(path)!r}: {exc.strerror}") from None
    from ..spec.source import YamlTooBig, parse_yaml

    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return parse_yaml(text)[1]  # YAML is a superset of JSON: any other suffix works too
    except YamlTooBig as exc:
        raise ConfigError(f"MCP config file {str(path)!r} is refused: {exc}") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        line = getattr(exc, "lineno", None) or getattr(
            getattr(exc, "problem_mark", None), "line", None
        )
        at = f" near line {line}" if line is not None else ""
        raise ConfigError(
            f"MCP config file {str(path)!r} is not valid {path.suffix.lstrip('.').upper() or 'YAML'}"
            f"{at}; fix its syntax"
        ) from None


def _parse_server(
    name: str, raw: Any, problems: list[str]
) -> StdioServerConfig | HttpServerConfig | None:
    prefix = f"mcpServers.{name}"
    if not isinstance(raw, Mapping):
        problems.append(f"{prefix}: expected a mapping of fields, got {type(raw).__name__}")
        return None
    data: dict[str, Any] = {k: v for k, v in raw.items() if k not in _IGNORED_KEYS}
    data = _substitute(data, prefix, problems)
    for field in ("env", "headers"):  # YAML writes numbers unquoted; they are strings here
        if isinstance(data.get(field), Mapping):
            data[field] = {
                str(k): str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                for k, v in data[field].items()
            }
    kind = data.get("type")
    if kind is None:
        if "command" in data:
            kind = "stdio"
        elif "url" in data:
            kind = (
                "sse"
                if urlsplit(str(data["url"])).path.rstrip("/").endswith("/sse")
                else "streamable-http"
            )
        else:
            problems.append(
                f"{prefix}: neither 'command' nor 'url' is given; add \"command\" (and \"args\") to "
                'start a local server, or "url" to reach one over HTTP'
            )
            return None
    if kind not in _TYPE_ALIASES:
        problems.append(
            f"{prefix}.type: unknown transport {kind!r}; use 'stdio', 'sse' or 'streamable-http'"
        )
        return None
    data["type"] = _TYPE_ALIASES[kind]
    model = StdioServerConfig if data["type"] == "stdio" else HttpServerConfig
    try:
        return model.model_validate({**data, "name": name})
    except pydantic.ValidationError as exc:
        for err in exc.errors(include_input=False, include_url=False):
            problems.append(_explain(prefix, data["type"], err))
        return None


def _substitute(value: Any, where: str, problems: list[str]) -> Any:
    """Replace ``${VAR}`` in every string of ``value``, noting unset variables."""

    def unset(var: str, path: tuple[Any, ...]) -> str:
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        problems.append(
            f"{where}{at}: environment variable {var} is not set; export it, "
            f"or write ${{{var}:-default}} to give a default"
        )
        return ""

    return substitute_vars(value, unset)


_FIXES = {
    "command": 'the executable that starts the server, e.g. "python" or "npx"',
    "args": 'a list of strings, e.g. ["-m", "my_server"]',
    "env": 'a mapping of variable names to strings, e.g. {"API_KEY": "${API_KEY}"}',
    "cwd": "a directory path",
    "url": 'an http(s) URL of the MCP endpoint, e.g. "http://127.0.0.1:8765/mcp"',
    "headers": 'a mapping of header names to strings, e.g. {"Authorization": "Bearer ${TOKEN}"}',
    "timeout": "a positive number of seconds",
    "sse_read_timeout": "a positive number of seconds",
    "client_session_timeout_seconds": "a positive number of seconds",
    "disabled": "true or false",
    "description": "a string",
}


def _explain(prefix: str, kind: str, err: Any) -> str:
    loc = [str(part) for part in err["loc"]]
    field = loc[0] if loc else ""
    path = ".".join([prefix, *loc]) if loc else prefix
    if err["type"] == "extra_forbidden":
        known = StdioServerConfig if kind == "stdio" else HttpServerConfig
        fields = ", ".join(f for f in known.model_fields if f != "name")
        other = (
            {"url", "headers", "sse_read_timeout"}
            if kind == "stdio"
            else {"command", "args", "env", "cwd"}
        )
        if field in other:
            return f"{path}: not used by {kind} servers; remove it, or fix 'type' (fields for {kind}: {fields})"
        return f"{path}: unknown field; remove it or fix its spelling (fields for {kind}: {fields})"
    if err["type"] == "missing":
        return f"{path}: required for {kind} servers; give {_FIXES.get(field, 'a value')}"
    return f"{path}: {err['msg']}; give {_FIXES.get(field, 'a valid value')}"


def safe_url(url: str) -> str:
    """``url`` without credentials or query values, for showing."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    shown = f"{parts.scheme}://{host}{parts.path}"
    return shown + (f"?{_MASK}" if parts.query else "")
