"""Environment access over MCP: the ``mcpServers`` config, the :class:`Sandbox`, and the
bundled local environment server (``aworld-graph env serve``).

A :class:`Sandbox` is a :class:`~aworld_graph.tools.ToolProvider`: give it an ``mcpServers``
config (dict or JSON/YAML path) and, optionally, the names of the servers to use.
"""

from __future__ import annotations

from ._connection import ServerUnavailable
from .config import HttpServerConfig, McpConfig, StdioServerConfig, load_mcp_config
from .sandbox import McpServers, Sandbox

__all__ = [
    "HttpServerConfig",
    "McpConfig",
    "McpServers",
    "Sandbox",
    "ServerUnavailable",
    "StdioServerConfig",
    "load_mcp_config",
]
