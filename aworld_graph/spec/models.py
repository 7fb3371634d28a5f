"""The YAML file formats as pydantic models: ``workflows/*.yaml`` and ``nodes/*.yaml``.

These models are the boundary only: they check the shape and types of what a file says and
generate the JSON Schemas shipped in ``aworld_graph/schemas/``. Turning a checked file into a
:class:`~aworld_graph.swarm.Swarm` (and every check that needs more than one field) is the
loader's job.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, StrictBool, Tag

__all__ = [
    "AgentCard",
    "CardRef",
    "CriticCard",
    "Demo",
    "DemoCall",
    "EdgeSpec",
    "FunctionCard",
    "HumanCard",
    "InlineWorkflow",
    "ModelSettings",
    "NodeCard",
    "NodeEntry",
    "Parallel",
    "RemoteCard",
    "Serial",
    "Step",
    "WorkflowHeader",
    "WorkflowRef",
    "WorkflowSpec",
    "node_entry_tag",
    "step_tag",
]

BUILD_TYPES = ("workflow", "handoff", "team", "hybrid")
CARD_KINDS = ("agent", "critic", "human", "function", "remote")
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _env_bool(value: Any) -> Any:
    """``true``/``false`` as text too (what a ``${VAR}`` gives); any other value is left for
    the strict check, which names the field."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


class _Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, populate_by_name=True, frozen=True
    )


class ModelSettings(_Spec):
    """How a node reaches its model. Unset fields fall back to ``LLM_*`` environment variables,
    then to the embedded local model."""

    llm_provider: str | None = None
    """``openai`` (any OpenAI-compatible endpoint) or ``local`` (the embedded model)."""
    llm_model_name: str | None = None
    """Model name sent to the endpoint, e.g. ``gpt-4o-mini``."""
    llm_base_url: str | None = None
    """Base URL of the OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1``."""
    llm_temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature."""
    llm_api_key_env: str | None = Field(default=None, pattern=ENV_NAME)
    """NAME of the environment variable holding the API key (e.g. ``OPENAI_API_KEY``); the key
    itself is never written in a file."""
    max_retries: int | None = Field(default=None, ge=0)
    """Retries on 429, 5xx and timeouts."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds to wait for one model call."""
    params: dict[str, Any] | None = None
    """Extra parameters for ``chat.completions.create`` (``max_tokens``, ``top_p``, ...)."""
    record_tokens: Annotated[StrictBool, BeforeValidator(_env_bool)] = False
    """Keep the prompt's and the sampled completion's token ids and logprobs in each LLM call's
    trace record (``true`` for rollouts meant for training; docs/training.md)."""


class DemoCall(_Spec):
    """A tool call in a few-shot example, with what the tool returned."""

    name: str = Field(min_length=1)
    """The tool called."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Its arguments."""
    result: str = ""
    """What the tool returned."""


class Demo(_Spec):
    """A few-shot example shown to the agent before the conversation."""

    input: str
    """The example request."""
    output: str
    """The answer the agent should give to it."""
    tool_calls: list[DemoCall] = Field(default_factory=list)
    """Tool calls made before that answer, each with its result; the example is then shown as
    the request, the calls, their results and the answer (as the agent's own turns are)."""


class _CardBase(_Spec):
    name: str = Field(min_length=1)
    """Unique node name; other fields (topology, edges, judges) refer to it."""
    description: str = ""
    """What the node does; shown to agents that can hand off or delegate to it."""
    version: int = Field(default=1, ge=1)
    """Card version; meta-learning writes a new version for every rewrite."""
    parent: str | None = None
    """The card this one was derived from (name@version or a path), if any."""
    score: float | None = None
    """Evaluation score of this version on the optimizer's task set, if measured."""
    operator: str | None = None
    """The rewrite operator that produced this version (e.g. ``rewrite_prompt``), if any."""


class AgentCard(_CardBase):
    """An LLM agent: a system prompt, tools and a model."""

    kind: Literal["agent"]
    """Always ``agent``."""
    system_prompt: str = "You are a helpful assistant."
    """The system message the model sees first."""
    tools: list[str] = Field(default_factory=list)
    """Python tools: a built-in name (``calculator``) or an import path ``package.module:function``
    (this runs your code, like any plugin)."""
    mcp_servers: list[str] | None = None
    """Servers of the MCP config whose tools this agent may use; all of them when omitted and an
    ``mcp_config`` applies."""
    mcp_config: dict[str, Any] | str | None = None
    """This agent's own ``{mcpServers: ...}`` config (or a file path); otherwise the workflow's
    ``mcp_config`` applies to agents that list ``mcp_servers``."""
    model: ModelSettings | None = None
    """Model settings; the workflow's ``defaults`` fill what is left unset."""
    max_steps: int = Field(default=10, ge=1)
    """Most LLM calls this agent makes in one run."""
    tool_choice: Literal["auto", "required", "none"] = "auto"
    """Whether the model may (``auto``), must (``required``: the first call of a turn) or must
    not (``none``) call a tool."""
    demos: list[Demo] = Field(default_factory=list)
    """Few-shot examples."""


class CriticCard(_CardBase):
    """Scores the output of the node it judges; sends it back with feedback or lets it pass."""

    kind: Literal["critic"]
    """Always ``critic``."""
    judges: str = Field(min_length=1)
    """Name of the node whose output is judged (and retried on a low score)."""
    system_prompt: str | None = None
    """Instructions for an LLM judge (give this or ``scorer``)."""
    scorer: str | None = None
    """A Python scorer instead of an LLM judge: a built-in name (``contains_number``) or
    ``package.module:function`` taking ``(output, state)`` and returning a score in [0, 1]."""
    threshold: float = Field(default=0.7, ge=0, le=1)
    """Scores at or above this pass."""
    max_rounds: int = Field(default=3, ge=1)
    """Most verdicts per run; after that the output passes as it is."""
    model: ModelSettings | None = None
    """Model settings of an LLM judge."""


class HumanCard(_CardBase):
    """Stops the run for a person's reply (resume with ``aworld-graph resume ID --value ...``)."""

    kind: Literal["human"]
    """Always ``human``."""
    prompt: str = "Review the answer and reply (for example 'approve' or a correction)."
    """What the person is asked; their reply is kept in ``context.<name>``."""


class FunctionCard(_CardBase):
    """A plain Python function as a node: ``fn(state) -> dict`` of state updates."""

    kind: Literal["function"]
    """Always ``function``."""
    function: str = Field(pattern=r"^[\w.]+:[\w.]+$")
    """Import path ``package.module:function`` (this runs your code, like any plugin)."""


class RemoteCard(_CardBase):
    """An agent served elsewhere: an A2A agent, or an assistant of a LangGraph-API server
    (``aworld-graph serve``, LangGraph Platform); it is sent the latest message."""

    kind: Literal["remote"]
    """Always ``remote``."""
    url: str = Field(pattern=r"^https?://")
    """Where it is served, e.g. ``http://127.0.0.1:2024`` (``${VAR}`` is read from the
    environment)."""
    assistant_id: str | None = None
    """The assistant to run on a LangGraph-API server; omitted: an A2A agent."""
    protocol: Literal["a2a", "langgraph"] | None = None
    """``a2a`` or ``langgraph``; by default ``langgraph`` when ``assistant_id`` is given."""
    api_key_env: str | None = Field(default=None, pattern=ENV_NAME)
    """The environment variable holding the remote's API key (never the key itself)."""
    timeout: float = Field(default=300.0, gt=0)
    """Seconds to wait for the answer before the call is a tool error."""


NodeCard = Annotated[
    AgentCard | CriticCard | HumanCard | FunctionCard | RemoteCard, Field(discriminator="kind")
]
"""What a ``nodes/*.yaml`` file holds."""


class CardRef(_Spec):
    """A node card named explicitly: ``{card: solver}`` or ``{card: ../nodes/solver.yaml}``."""

    card: str = Field(min_length=1)
    """A card's name (looked up in ``nodes/`` next to, or one level above, the workflow) or a
    path relative to the workflow file."""


class WorkflowRef(_Spec):
    """Another workflow file used as one node (a nested swarm)."""

    workflow: str = Field(min_length=1)
    """Path of the workflow file, relative to this one."""


class EdgeSpec(_Spec):
    """An explicit edge: conditional, or a declared loop."""

    from_: str = Field(alias="from", min_length=1)
    """The node the edge leaves."""
    to: str = Field(min_length=1)
    """The node the edge enters."""
    when: str | None = None
    """A condition such as ``score >= 0.8 and "ok" in lower(context.review)``, or a predicate
    ``package.module:function`` over the state; the edge is taken only when it holds."""
    max_rounds: int | None = Field(default=None, ge=1)
    """Declares a loop: the most times the edge is taken in one run."""


def step_tag(value: Any) -> str | None:
    """Which kind of topology step ``value`` is (for the tagged union)."""
    if isinstance(value, str):
        return "name"
    if isinstance(value, list):
        return "pair"
    if isinstance(value, dict | BaseModel):
        keys = set(value) if isinstance(value, dict) else set(type(value).model_fields)
        for tag in ("parallel", "serial"):
            if tag in keys:
                return tag
    return None


class Parallel(_Spec):
    """Branches that run at the same time; the next step waits for all of them (a join)."""

    parallel: list[Step] = Field(min_length=2)
    """The branches: node names or ``{serial: [...]}`` chains."""


class Serial(_Spec):
    """A chain of steps inside a parallel group."""

    serial: list[Step] = Field(min_length=1)
    """The steps, in order."""


Step = Annotated[
    Annotated[str, Tag("name")]
    | Annotated[list[str], Tag("pair")]
    | Annotated[Parallel, Tag("parallel")]
    | Annotated[Serial, Tag("serial")],
    Discriminator(
        step_tag,
        custom_error_type="step",
        custom_error_message="a topology entry is a node name, 'a -> b', [a, b], "
        "{parallel: [...]} or {serial: [...]}",
    ),
]
"""One topology entry. Workflows: a node name, ``{parallel: [...]}`` or ``{serial: [...]}``.
Handoff, team and hybrid swarms: a pair ``"a -> b"`` or ``[a, b]``."""


class WorkflowHeader(_Spec):
    """The scalar fields of a workflow (everything but nodes, topology and edges)."""

    name: str = Field(min_length=1)
    """The workflow's name (also the swarm's name)."""
    description: str = ""
    """What the workflow does."""
    version: int = Field(default=1, ge=1)
    """Version of this file; recorded in every run's metadata."""
    build_type: Literal["workflow", "handoff", "team", "hybrid"] = "workflow"
    """How the topology is read: ``workflow`` (a DAG of steps), ``handoff`` (agents pass control
    along ``a -> b`` pairs), ``team`` (the root agent delegates to the others) or ``hybrid``
    (a team whose members also hand off to one another)."""
    root_agent: str | None = None
    """Where the run starts: the team leader, the first agent of a handoff swarm."""
    max_steps: int | None = Field(default=None, ge=1)
    """Upper bound on node executions in one run."""
    mcp_config: dict[str, Any] | str | None = None
    """``{mcpServers: {...}}`` (or a JSON/YAML file path, relative to this file) for the agents
    that list ``mcp_servers``. ``${VAR}`` in it is filled when a server starts."""
    defaults: ModelSettings | None = None
    """Model settings for every agent and critic; a card's own ``model`` wins."""


def node_entry_tag(value: Any) -> str | None:
    """Which kind of ``nodes`` entry ``value`` is (for the tagged union)."""
    if isinstance(value, str):
        return "name"
    if isinstance(value, dict):
        if "card" in value:
            return "card"
        if "workflow" in value and "kind" not in value:
            return "workflow-file"
        kind = value.get("kind")
        return kind if kind in (*CARD_KINDS, "workflow") else None
    if isinstance(value, BaseModel):
        return getattr(value, "kind", None) or (
            "card" if isinstance(value, CardRef) else "workflow-file"
        )
    return None


class WorkflowSpec(WorkflowHeader):
    """A ``workflows/*.yaml`` file: nodes wired into a topology."""

    nodes: list[NodeEntry] = Field(min_length=1)
    """The nodes: card names (``solver``), ``{card: path}``, ``{workflow: path}`` (a nested
    swarm) or inline definitions (``{kind: agent, name: ..., ...}``)."""
    topology: list[Step] | None = None
    """Workflow: the steps in order (a top-level list is a serial chain). Handoff, team and
    hybrid: ``"a -> b"`` pairs. Omitted: the nodes in order (workflow), or the first node
    leads (team)."""
    edges: list[EdgeSpec] = Field(default_factory=list)
    """Extra edges: conditional branches and declared loops."""


class InlineWorkflow(WorkflowSpec):
    """A nested swarm defined inside a workflow's ``nodes``."""

    kind: Literal["workflow"]
    """Always ``workflow``."""


NodeEntry = Annotated[
    Annotated[str, Tag("name")]
    | Annotated[CardRef, Tag("card")]
    | Annotated[WorkflowRef, Tag("workflow-file")]
    | Annotated[AgentCard, Tag("agent")]
    | Annotated[CriticCard, Tag("critic")]
    | Annotated[HumanCard, Tag("human")]
    | Annotated[FunctionCard, Tag("function")]
    | Annotated[RemoteCard, Tag("remote")]
    | Annotated[InlineWorkflow, Tag("workflow")],
    Discriminator(
        node_entry_tag,
        custom_error_type="node_entry",
        custom_error_message="a node is a card name, {card: ...}, {workflow: FILE} or an inline "
        "definition with kind: agent | critic | human | function | remote | workflow",
    ),
]
"""One ``nodes`` entry: a card reference or an inline definition."""

Parallel.model_rebuild()
Serial.model_rebuild()
WorkflowSpec.model_rebuild()
InlineWorkflow.model_rebuild()
