"""Asking a person inside a node: LangGraph's ``interrupt`` with a value that both this
library's readers and LangChain's Agent Chat UI understand, and the answer read back.

The value is ``{"node", "prompt", "answer"}`` (what the CLI, A2A, MCP and webhooks read) and,
in the same object, LangGraph's agent-inbox request (``action_request``, ``config``,
``description``) that the Agent Chat UI renders as a form to accept or reply to. Its answers,
``[{"type": "response", "args": TEXT}]`` and ``[{"type": "accept", ...}]``, are read as
``TEXT`` and ``"approve"`` (``edit`` of the answer: the edited text; ``ignore``:
``"ignore"``); any other value as it is. An agent-inbox answer that cannot be read (an
unknown ``type``, ``args`` of the wrong kind) is not taken: the node asks again, with an
``error`` in the value naming the field, LangGraph's pattern for checking a person's input.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

__all__ = ["ask", "reply_of", "request"]


def request(node: str, prompt: str, answer: Any, description: str = "") -> dict[str, Any]:
    """The interrupt's value of node ``node`` asking ``prompt`` about ``answer``."""
    return {
        "node": node,
        "prompt": prompt,
        "answer": answer,
        # LangGraph's agent-inbox HumanInterrupt (langgraph.prebuilt.interrupt): the action is
        # its title, the args are shown with the Accept button
        "action_request": {"action": prompt, "args": {} if answer is None else {"answer": answer}},
        "config": {
            "allow_respond": True,
            "allow_accept": True,
            "allow_edit": False,
            "allow_ignore": False,
        },
        "description": description or prompt,
    }


def reply_of(node: str, value: Any) -> Any:
    """The value kept for resume value ``value``: an agent-inbox answer (a list of ``{"type",
    "args"}``) as its text, anything else as it is; a ``ValueError`` naming the field for an
    agent-inbox answer it cannot read."""
    if not (
        isinstance(value, list)
        and value
        and all(isinstance(item, dict) and "type" in item for item in value)
    ):
        return value
    fix = (
        'resume with [{"type": "response", "args": "your reply"}], '
        '[{"type": "accept", "args": null}] or a plain text'
    )
    where = f"human step {node!r}: the resume value"
    if len(value) != 1:
        raise ValueError(f"{where} holds {len(value)} answers, this step asks for one; {fix}")
    kind, args = value[0]["type"], value[0].get("args")
    if kind == "response":
        if not isinstance(args, str):
            raise ValueError(f"{where}'s [0].args must be the reply's text; {fix}")
        return args
    if kind == "accept":
        return "approve"
    if kind == "ignore":
        return "ignore"
    if kind == "edit":
        edited = args.get("args") if isinstance(args, dict) else None
        edited = edited.get("answer") if isinstance(edited, dict) else None
        if not isinstance(edited, str):
            raise ValueError(f"{where}'s [0].args.args.answer must be the edited text; {fix}")
        return edited
    raise ValueError(
        f"{where}'s [0].type {str(kind)[:40]!r} is not 'accept', 'response', 'edit' or "
        f"'ignore'; {fix}"
    )


def ask(
    node: str, prompt: str, answer: Any, description: str = ""
) -> tuple[Any, list[tuple[Any, str]]]:
    """Ask a person (``interrupt``) until an answer reads: the value kept, and each answer
    refused before it with why (to keep in the trajectory)."""
    asked = request(node, prompt, answer, description)
    shown, refused = asked, list[tuple[Any, str]]()
    while True:
        given = interrupt(shown)
        try:
            return reply_of(node, given), refused
        except ValueError as exc:
            refused.append((given, str(exc)))
            shown = {**asked, "error": str(exc), "description": f"{exc}\n\n{prompt}"}
