"""Row builders, one per export format. Each takes runs and yields plain JSON-able rows.

==============  =============================================================================
``aworld``      AWorld trajectory items, one per agent step: ``{"id", "meta", "state",
                "action", "reward"}``
``openai``      OpenAI chat fine-tuning: ``{"messages": [...], "tools": [...]}``
``sharegpt``    ShareGPT (LLaMA-Factory flavour): ``{"conversations": [{"from", "value"}],
                "system", "tools"}``
``trl-sft``     TRL ``SFTTrainer``: ``{"messages": [...], "tools": "<json>"|null}``
``trl-dpo``     TRL ``DPOTrainer``: ``{"prompt", "chosen", "rejected", "score_chosen",
                "score_rejected", "tools"}`` – best vs worst run of the same task
``trl-reward``  prompt + completion + reward rows (GRPO prompts, KTO labels):
                ``{"prompt", "completion", "reward", "label", "ground_truth", ...}``
``verl``        verl's RL data: ``{"data_source", "prompt", "ability", "reward_model":
                {"style", "ground_truth"}, "extra_info"}``
==============  =============================================================================

Tool-call ``arguments`` stay JSON strings (OpenAI's convention, and Arrow-safe: argument
objects differ per tool); TRL's trainers accept ``tools`` as a JSON string.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._chat import ChatSample, chat_samples, start_prompt
from .runs import Run

__all__ = [
    "FORMATS",
    "aworld_rows",
    "openai_rows",
    "sharegpt_rows",
    "trl_dpo_rows",
    "trl_reward_rows",
    "trl_sft_rows",
    "verl_rows",
]

Rows = Iterator[dict[str, Any]]


def _samples(runs: Iterable[Run], per: str, agent: str | None) -> Iterator[ChatSample]:
    for run in runs:
        yield from chat_samples(run, per=per, agent=agent)


def aworld_rows(runs: Iterable[Run], **_: Any) -> Rows:
    """AWorld trajectory items of each run, with its reward and thread id in ``meta``."""
    for run in runs:
        for item in run.trajectory():
            item["meta"]["thread_id"] = run.thread_id
            item["meta"]["run_status"] = run.status
            item["meta"]["run_reward"] = run.reward
            yield item


def openai_rows(
    runs: Iterable[Run], *, per: str = "episode", agent: str | None = None, **_: Any
) -> Rows:
    """OpenAI chat fine-tuning samples; assistant messages that are only context (other
    agents', earlier turns') get ``"weight": 0``."""
    for sample in _samples(runs, per, agent):
        messages = []
        for message, own in zip(sample.messages, sample.own, strict=True):
            if message["role"] == "assistant" and not own:
                message = {**message, "weight": 0}
            messages.append(message)
        row: dict[str, Any] = {"messages": messages}
        if sample.tools:
            row["tools"] = sample.tools
        yield row


def _sharegpt_call(message: dict[str, Any]) -> str:
    calls = []
    for call in message.get("tool_calls") or []:
        try:
            arguments = json.loads(call["function"]["arguments"] or "{}")
        except ValueError:
            arguments = call["function"]["arguments"]
        calls.append({"name": call["function"]["name"], "arguments": arguments})
    return json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)


def _sharegpt_turns(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    turns: list[dict[str, str]] = []
    results: list[str] = []
    for m in [*messages, {"role": "end"}]:
        role = m["role"]
        if role == "tool":
            results.append(_text(m.get("content")))
            continue
        if results:
            value = results[0] if len(results) == 1 else json.dumps(results, ensure_ascii=False)
            turns.append({"from": "observation", "value": value})
            results = []
        if role == "end":
            break
        if role == "user":
            if turns and turns[-1]["from"] == "human":  # keep strict alternation
                turns[-1]["value"] += "\n\n" + _text(m.get("content"))
            else:
                turns.append({"from": "human", "value": _text(m.get("content"))})
        elif role == "assistant" and m.get("tool_calls"):
            turns.append({"from": "function_call", "value": _sharegpt_call(m)})
        elif role == "assistant":
            turns.append({"from": "gpt", "value": _text(m.get("content"))})
    if turns and turns[-1]["from"] == "observation":
        turns.pop()  # LLaMA-Factory wants gpt/function_call last (an even count of turns)
    return turns


def sharegpt_rows(
    runs: Iterable[Run], *, per: str = "episode", agent: str | None = None, **_: Any
) -> Rows:
    """ShareGPT conversations: ``human``/``gpt``/``function_call``/``observation`` turns.

    Parallel tool calls become one ``function_call`` (a JSON list) and their results one
    ``observation`` (a JSON list), so human/observation and gpt/function_call alternate.
    """
    for sample in _samples(runs, per, agent):
        system = "\n\n".join(str(m["content"]) for m in sample.messages if m["role"] == "system")
        row: dict[str, Any] = {"conversations": _sharegpt_turns(sample.messages), "system": system}
        if sample.tools:
            row["tools"] = json.dumps(
                [t.get("function", t) for t in sample.tools], ensure_ascii=False
            )
        yield row


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _trl_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages for Hugging Face chat templates: tool messages also carry the tool ``name``."""
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    out = []
    for m in messages:
        m = dict(m)
        if m["role"] == "tool" and m.get("tool_call_id") in names:
            m["name"] = names[m["tool_call_id"]]
        out.append(m)
    return out


def _tools_json(tools: list[dict[str, Any]]) -> str | None:
    return json.dumps(tools, ensure_ascii=False) if tools else None


def trl_sft_rows(
    runs: Iterable[Run], *, per: str = "episode", agent: str | None = None, **_: Any
) -> Rows:
    """TRL ``SFTTrainer`` rows (conversational ``messages`` + ``tools`` as JSON)."""
    for sample in _samples(runs, per, agent):
        yield {"messages": _trl_messages(sample.messages), "tools": _tools_json(sample.tools)}


def _comparable(messages: list[dict[str, Any]]) -> list[Any]:
    """The messages with call ids replaced by the call's place in the conversation, and
    arguments decoded: two runs that make the same calls (name and arguments) with other
    ids compare equal."""
    places: dict[str, int] = {}
    out: list[Any] = []
    for m in messages:
        m = dict(m)
        calls = []
        for call in m.get("tool_calls") or []:
            places[str(call.get("id"))] = len(places)
            fn = call.get("function") or {}
            try:
                arguments = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                arguments = fn.get("arguments")
            calls.append((fn.get("name"), json.dumps(arguments, sort_keys=True)))
        if calls:
            m["tool_calls"] = calls
        if "tool_call_id" in m:
            m["tool_call_id"] = places.get(str(m["tool_call_id"]), m["tool_call_id"])
        out.append(m)
    return out


def _divergence(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` after which both continue with
    an assistant message (0 if there is none). Calls are compared by name and arguments,
    not by their ids."""
    cut = 0
    left, right = _comparable(a), _comparable(b)
    for i in range(min(len(a), len(b))):
        if a[i]["role"] == "assistant" and b[i]["role"] == "assistant":
            cut = i
        if left[i] != right[i]:
            break
    else:
        return 0
    return cut


def trl_dpo_rows(runs: Iterable[Run], *, agent: str | None = None, **_: Any) -> Rows:
    """Preference pairs: per task (rollout group, else same input) the best-scored run's
    episode is ``chosen`` and the worst's ``rejected``; pairs of equal reward are skipped.

    ``prompt`` is the longest shared beginning of both conversations that ends where both
    go on with an assistant message.
    """
    groups: dict[str, list[tuple[float, ChatSample]]] = {}
    for run in runs:
        if run.reward is None:
            continue
        for sample in chat_samples(run, per="episode", agent=agent):
            groups.setdefault(run.group, []).append((run.reward, sample))
    for scored in groups.values():
        if len(scored) < 2:
            continue
        best = max(scored, key=lambda s: s[0])
        worst = min(reversed(scored), key=lambda s: s[0])
        if best[0] <= worst[0]:
            continue
        chosen, rejected = _trl_messages(best[1].messages), _trl_messages(worst[1].messages)
        cut = _divergence(chosen, rejected)
        if cut == 0:
            continue
        yield {
            "prompt": chosen[:cut],
            "chosen": chosen[cut:],
            "rejected": rejected[cut:],
            "score_chosen": best[0],
            "score_rejected": worst[0],
            "tools": _tools_json(best[1].tools),
        }


def _truth(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def trl_reward_rows(runs: Iterable[Run], *, agent: str | None = None, **_: Any) -> Rows:
    """One row per scored run: its prompt, its completion and its reward.

    ``prompt`` + ``ground_truth`` feed ``GRPOTrainer`` (which passes extra columns to reward
    functions); ``completion`` + ``label`` (reward passed) feed ``KTOTrainer``.
    """
    for run in runs:
        if run.reward is None:
            continue
        for sample in chat_samples(run, per="episode", agent=agent):
            prompt, completion = sample.split()
            prompt, completion = _trl_messages(prompt), _trl_messages(completion)
            episode = run.episode or {}
            yield {
                "prompt": prompt,
                "completion": completion,
                "reward": run.reward,
                "label": episode.get("status", "pass" if run.success else "fail") == "pass",
                "ground_truth": _truth(run.ground_truth),
                "group": run.group,
                "task_id": str(run.metadata.get("task_id") or run.thread_id),
                "thread_id": run.thread_id,
                "tools": _tools_json(sample.tools),
            }


def verl_rows(runs: Iterable[Run], *, agent: str | None = None, **_: Any) -> Rows:
    """verl RL prompts: ``prompt`` is what the run's first agent turn started from (system
    prompt + task); the ground truth goes to ``reward_model``; the run's answer, reward and
    the tools offered to ``extra_info``."""
    index = 0
    for run in runs:
        for sample in chat_samples(run, per="episode", agent=agent):
            prompt = start_prompt(run) or sample.split()[0]
            yield {
                "data_source": str(run.task_name or run.metadata.get("name") or "aworld_graph"),
                "prompt": [{"role": m["role"], "content": _text(m.get("content"))} for m in prompt],
                "ability": "agent",
                "reward_model": {"style": "rule", "ground_truth": _truth(run.ground_truth)},
                "extra_info": {
                    "split": "train",
                    "index": index,
                    "task_id": str(run.metadata.get("task_id") or run.thread_id),
                    "thread_id": run.thread_id,
                    "answer": run.answer,
                    "reward": run.reward,
                    "tools": _tools_json(sample.tools),
                },
            }
            index += 1


def _dedup_key(fmt: str, row: dict[str, Any]) -> Any:
    if fmt == "aworld":
        return (row["meta"].get("thread_id"), row["id"])
    if fmt == "verl":
        return (row["data_source"], row["prompt"], row["reward_model"]["ground_truth"])
    if fmt == "trl-reward":
        return (row["prompt"], row["completion"], row["reward"])
    return None


FORMATS: dict[str, Callable[..., Rows]] = {
    "aworld": aworld_rows,
    "openai": openai_rows,
    "sharegpt": sharegpt_rows,
    "trl-sft": trl_sft_rows,
    "trl-dpo": trl_dpo_rows,
    "trl-reward": trl_reward_rows,
    "verl": verl_rows,
}
"""Format name → row builder ``fn(runs, per=..., agent=...)``."""


def dedup_key(fmt: str, row: dict[str, Any], text: str | None = None) -> bytes:
    """Rows with equal keys are duplicates (ids and timings left out where they vary);
    ``text`` is the row's JSON when the caller has it already."""
    key = _dedup_key(fmt, row)
    if key is None:
        data = text if text is not None else json.dumps(row, ensure_ascii=False, default=str)
    else:
        data = json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(data.encode(), digest_size=16).digest()
