"""A TRL rollout restarted on the same step resumes its episodes from the store: a finished
tool call is not run again, and a finished episode is read back, not sampled again. A thread
name that comes again with another task (a run_id reused on other data) fails that row: the
other task's run is never read back as its episode. (slime's resume:
tests/train/test_areal_slime.py.)"""

from __future__ import annotations

import json
from typing import Any

from aworld_graph import Agent, tool
from aworld_graph.errors import ModelError
from aworld_graph.model import ModelResponse, ToolCall
from aworld_graph.testing import FunctionModel
from aworld_graph.train.trl import rollout_func


class _State:
    def __init__(self, step: int) -> None:
        self.global_step = step


class _Tokenizer:
    """The two things the rollout function asks of TRL's tokenizer (for a failed prompt)."""

    eos_token_id = 0

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}


class Trainer:
    """What the rollout function reads of a ``GRPOTrainer``."""

    def __init__(self, step: int) -> None:
        self.state = _State(step)
        self.processing_class = _Tokenizer()


def test_a_restarted_step_resumes_its_episodes() -> None:
    ran: list[tuple[int, int]] = []
    calls: list[int] = []
    down = [True]

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        ran.append((a, b))
        return a + b

    def model(messages: list[dict[str, Any]], tools: Any) -> Any:
        calls.append(1)
        if not any(m.get("role") == "tool" for m in messages):
            args = json.dumps({"a": 2, "b": 2})
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="add", arguments=args)])
        if down[0]:  # the first attempt dies after the tool call finished
            down[0] = False
            raise ModelError("the endpoint went away")
        return "4"

    agent = Agent(name="a", system_prompt="s", model=FunctionModel(model), tools=[add])

    def restarted() -> Any:  # a trainer process started again: a rollout function of its own
        return rollout_func(agent=agent, run_id="exp1")

    first = restarted()(["What is 2+2?"], Trainer(step=3))
    assert "status 'error'" in first["aworld_error"][0]
    again = restarted()(["What is 2+2?"], Trainer(step=3))
    assert again["answer"] == ["4"]
    assert ran == [(2, 2)]  # the finished tool call was not run again
    assert len(calls) == 3  # call, failed call, the resumed answer
    restarted()(["What is 2+2?"], Trainer(step=3))
    assert len(calls) == 3  # a finished episode is read back
    restarted()(["What is 2+2?"], Trainer(step=4))
    assert len(calls) == 5 and ran == [(2, 2), (2, 2)]  # a new step samples anew


def test_a_thread_holding_another_task_is_never_read_back_as_this_one() -> None:
    calls: list[str] = []

    def model(messages: list[dict[str, Any]], tools: Any) -> Any:
        calls.append(messages[-1]["content"])
        return "4" if "2+2" in messages[-1]["content"] else "6"

    agent = Agent(name="a", system_prompt="s", model=FunctionModel(model))
    assert rollout_func(agent=agent, run_id="exp1")(["What is 2+2?"], Trainer(step=3))[
        "answer"
    ] == ["4"]
    func = rollout_func(agent=agent, run_id="exp1")  # another process, the same run_id
    reused = func(["What is 3+3?"], Trainer(step=3))  # on other data
    error = reused["aworld_error"][0]
    assert "thread 'trl-exp1-p0-train-s3-g0-0' holds another episode" in error
    assert "'What is 2+2?'" in error and "own run_id" in error
    assert reused["answer"] == [None] and reused["aworld_reward"] == [None]
    assert reused["env_mask"] == [[0]]  # nothing of it is trained on
    assert calls == ["What is 2+2?"]
    assert func(["What is 3+3?"], Trainer(step=4))["answer"] == ["6"]  # its own thread


class _Accelerator:
    def __init__(self, index: int) -> None:
        self.process_index = index


class _Model:
    def __init__(self, training: bool) -> None:
        self.training = training


def test_each_process_mode_and_generation_of_a_step_has_its_own_episodes() -> None:
    """TRL hands each process its own prompts, may generate more than once in a step and
    evaluates at the step it trains: none of these reads another's episode back; the same
    calls in a restarted process read each one back."""
    calls: list[str] = []

    def model(messages: list[dict[str, Any]], tools: Any) -> Any:
        calls.append(messages[-1]["content"])
        return f"answer {len(calls)}"

    agent = Agent(name="a", system_prompt="s", model=FunctionModel(model))

    def trainer(process: int, training: bool = True) -> Trainer:
        made = Trainer(step=7)
        made.accelerator = _Accelerator(process)  # type: ignore[attr-defined]
        made.model = _Model(training)  # type: ignore[attr-defined]
        return made

    def round_of_calls() -> list[Any]:
        rank0, rank1 = (
            rollout_func(agent=agent, run_id="exp2"),
            rollout_func(agent=agent, run_id="exp2"),
        )
        return [
            rank0(["q"], trainer(0))["answer"],
            rank1(["q"], trainer(1))["answer"],  # the same prompt on another process
            rank0(["q"], trainer(0))["answer"],  # a second generation in the same step
            rank0(["q"], trainer(0, training=False))["answer"],  # evaluation at that step
        ]

    first = round_of_calls()
    assert len(calls) == 4 and len({a[0] for a in first}) == 4  # four episodes, each sampled
    assert round_of_calls() == first and len(calls) == 4  # restarted: each read back
