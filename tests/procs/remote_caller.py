"""The caller of the remote-kill test (tests/test_remote_kill.py), in a module of its own so the
CLI processes that run and resume it import only what the workflow needs.

``swarm``: one ``RemoteAgent`` node at ``$REMOTE_URL`` (an A2A agent, or with
``$REMOTE_ASSISTANT`` that assistant of a LangGraph-API server).
"""

from __future__ import annotations

import os

from aworld_graph import RemoteAgent, Swarm


def caller(url: str, assistant: str | None) -> Swarm:
    """One remote node at ``url`` (an A2A agent, or with ``assistant`` that assistant of a
    LangGraph-API server)."""
    talk = RemoteAgent(name="talk", url=url, assistant_id=assistant, timeout=60, poll_interval=0.05)
    return Swarm(talk, name="caller")


swarm = caller(
    os.environ.get("REMOTE_URL", "http://127.0.0.1:9"), os.environ.get("REMOTE_ASSISTANT") or None
)
"""The workflow the killed CLI runs: :func:`caller` at ``$REMOTE_URL`` (with
``$REMOTE_ASSISTANT``)."""
