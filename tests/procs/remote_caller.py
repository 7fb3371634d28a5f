"""The callers that the kill tests of ``RemoteAgent`` run in CLI processes
(tests/test_remote_kill.py, tests/test_remote_agent.py), in a module of their own so the
processes that run and resume them import only what the workflows need.

Each is one ``RemoteAgent`` node at ``$REMOTE_URL`` (an A2A agent, or with
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

far = Swarm(
    RemoteAgent(
        name="far",
        url=os.environ.get("REMOTE_URL", "http://127.0.0.1:9"),
        assistant_id=os.environ.get("REMOTE_ASSISTANT") or None,
        poll_interval=0.05,
    ),
    name="far",
)
"""The workflow tests/test_remote_agent.py's killed CLI runs: one remote node at
``$REMOTE_URL``, polled every 0.05 s."""
