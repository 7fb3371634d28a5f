"""LangGraph applications the server tests serve as a LangGraph user writes them (no aworld-graph
import): plain ``StateGraph``s with LangChain messages, an interrupt, a factory, a subgraph, a
runtime context, a custom stream, a store. Their one chat model is LangChain's fake one, so nothing uses
the network."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import interrupt
from typing_extensions import TypedDict


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int


def _said(state: ChatState) -> str:
    return str(state["messages"][-1].content)


def reply(state: ChatState) -> dict[str, Any]:
    """A chat model's streamed answer: 'you said: <the last message>'."""
    model = GenericFakeChatModel(messages=iter([AIMessage(content=f"you said: {_said(state)}")]))
    writer = get_stream_writer()
    writer({"progress": "replying"})
    return {"messages": [model.invoke(state["messages"])], "turns": state.get("turns", 0) + 1}


_chat = StateGraph(ChatState)
_chat.add_node("reply", reply)
_chat.add_edge(START, "reply")
_chat.add_edge("reply", END)
chat = _chat.compile(checkpointer=InMemorySaver())  # its own checkpointer: the server's replaces it
"""One node: a fake chat model answers 'you said: …'; counts the turns."""

chat_builder = _chat
"""The same graph, not compiled."""


class ReviewState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    draft: str
    verdict: str
    status: str
    """A field of the graph's own: not how its runs went."""


def draft(state: ReviewState) -> dict[str, Any]:
    return {"draft": f"draft of {_said(state)}", "status": "error"}  # type: ignore[arg-type]


def review(state: ReviewState) -> dict[str, Any]:
    verdict = interrupt({"question": "Approve the draft?", "draft": state["draft"]})
    return {"verdict": str(verdict), "messages": [AIMessage(content=f"verdict: {verdict}")]}


_review = StateGraph(ReviewState)
_review.add_node("draft", draft)
_review.add_node("review", review)
_review.add_edge(START, "draft")
_review.add_edge("draft", "review")
_review.add_edge("review", END)
review_graph = _review.compile()
"""Draft, then ask a person (``interrupt``); the answer is the verdict."""


def make_graph(config: RunnableConfig) -> Any:
    """A factory: the greeting comes from the run's ``configurable``."""
    greeting = str((config.get("configurable") or {}).get("greeting") or "hello")

    def greet(state: ChatState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"{greeting}, {_said(state)}")]}

    graph = StateGraph(ChatState)
    graph.add_node("greet", greet)
    graph.add_edge(START, "greet")
    graph.add_edge("greet", END)
    return graph  # not compiled: the server compiles it


@dataclass
class Persona:
    tone: str = "plain"


def speak(state: ChatState, runtime: Runtime[Persona]) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"[{runtime.context.tone}] {_said(state)}")]}


_persona = StateGraph(ChatState, context_schema=Persona)
_persona.add_node("speak", speak)
_persona.add_edge(START, "speak")
_persona.add_edge("speak", END)
persona = _persona.compile()
"""Answers in the ``tone`` of its runtime context."""


class Outer(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int


_outer = StateGraph(Outer)
_outer.add_node("inner", chat_builder.compile())  # a subgraph
_outer.add_edge(START, "inner")
_outer.add_edge("inner", END)
nested = _outer.compile()
"""``chat`` as a subgraph (node ``inner``)."""


class NoteState(TypedDict, total=False):
    note: str
    before: str | None
    after: str | None


def recall(state: NoteState, store: BaseStore) -> dict[str, Any]:
    """A node given the store as a parameter: reads the note kept before this run."""
    kept = store.get(("notes",), "k")
    return {"before": kept.value["text"] if kept else None}


async def remember(state: NoteState, runtime: Runtime[None]) -> dict[str, Any]:
    """A node reading ``runtime.store``: keeps the run's note, then reads it back."""
    assert runtime.store is not None, "the graph was run without a store"
    await runtime.store.aput(("notes",), "k", {"text": state["note"]})
    kept = await runtime.store.aget(("notes",), "k")
    return {"after": kept.value["text"] if kept else None}


_notes = StateGraph(NoteState).add_sequence([recall, remember]).add_edge(START, "recall")
notes = _notes.compile(store=InMemoryStore())  # its own store: the server's replaces it
"""Reads the note under ``("notes",)``, key ``k`` (``before``), then keeps the run's ``note``
there and reads it back (``after``)."""

not_a_graph = 42
