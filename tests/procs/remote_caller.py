"""The callers that the kill tests of ``RemoteAgent`` run in CLI processes
(tests/test_remote_kill.py, tests/test_remote_agent.py), in a module of their own so the
processes that run and resume them import only what the workflows need.

Each is one ``RemoteAgent`` node at ``$REMOTE_URL`` (an A2A agent, or with
``$REMOTE_ASSISTANT`` that assistant of a LangGraph-API server).
"""

from __future__ import annotations

import os

from aworld_graph import RemoteAgent, Swarm


def caller(url: str, assistant: str | None, name: str = "talk", timeout: float = 60.0) -> Swarm:
    """A swarm of one remote node ``name`` at ``url`` (an A2A agent, or with ``assistant``
    that assistant of a LangGraph-API server), polled every 0.05 s."""
    node = RemoteAgent(
        name=name, url=url, assistant_id=assistant, timeout=timeout, poll_interval=0.05
    )
    return Swarm(node, name=name)


_URL = os.environ.get("REMOTE_URL", "http://127.0.0.1:9")
_ASSISTANT = os.environ.get("REMOTE_ASSISTANT") or None

swarm = caller(_URL, _ASSISTANT)
"""The workflow tests/test_remote_kill.py's killed CLI runs: :func:`caller` at
``$REMOTE_URL`` (with ``$REMOTE_ASSISTANT``)."""

far = caller(_URL, _ASSISTANT, name="far", timeout=300.0)
"""The workflow tests/test_remote_agent.py's killed CLI runs: node ``far``, with
``RemoteAgent``'s default timeout."""
