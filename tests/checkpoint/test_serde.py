"""The serializer's read rule: app data classes rebuild with no configuration, anything that
could run code is refused with UnsafeCheckpointValue, and nothing refused is called."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import http
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import ormsgpack
import pydantic
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
)
from langgraph.types import Send

from aworld_graph.checkpoint import StrictSerializer, TrajectorySaver
from aworld_graph.errors import DefinitionError, UnsafeCheckpointValue

from . import pydantic_app

ROOT = Path(__file__).resolve().parents[2]


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Box:
    label: str
    level: Level


class Pair(NamedTuple):
    left: int
    right: int


class Card(pydantic.BaseModel):
    box: Box
    pair: Pair
    tags: set[str]
    when: datetime.datetime
    ident: uuid.UUID


def _call(code: int, *fields: Any) -> ormsgpack.Ext:
    """An extension the way JsonPlusSerializer encodes a call: ``(module, name, data...)``."""
    return ormsgpack.Ext(code, ormsgpack.packb(fields))


def _ext(code: int, *fields: Any) -> bytes:
    """A stored msgpack value that is one such call."""
    return ormsgpack.packb(_call(code, *fields))


def _read_in_new_process(kind: str, path: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_STRICT_MSGPACK"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    script = (
        "import sys; from tests.checkpoint.pydantic_app import read; "
        "read(sys.argv[1], sys.argv[2], 't')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, kind, str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_pydantic_state_app_reads_back_in_a_new_process_like_sqlite_saver(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}
    for kind in ("trajectory", "sqlite"):
        path = tmp_path / f"{kind}.db"
        saver = pydantic_app.checkpointer(kind, str(path))
        app = pydantic_app.build(saver)
        result = app.invoke(pydantic_app.State(), {"configurable": {"thread_id": "t"}})
        assert result["mood"] is pydantic_app.Mood.EXCITED
        assert result["point"] == pydantic_app.Point(1, 2)
        if kind == "trajectory":
            saver.close()
        else:
            saver.conn.close()
        seen[kind] = _read_in_new_process(kind, path)

    state = seen["trajectory"]["state"]
    assert state["mood"] == [repr(pydantic_app.Mood.EXCITED), "tests.checkpoint.pydantic_app.Mood"]
    assert state["point"] == ["Point(x=1, y=2)", "tests.checkpoint.pydantic_app.Point"]
    assert state["steps"] == ["2", "builtins.int"]
    assert len(seen["trajectory"]["history"]) == 4  # input, move, cheer, and the start
    assert seen["trajectory"] == seen["sqlite"]


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """A file that any of the crafted payloads below would create if it ran."""
    return tmp_path / "ran"


def _crafted(marker: Path) -> list[tuple[str, bytes]]:
    touch = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    return [
        ("os.system", _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", f"touch {marker}")),
        (
            "subprocess.Popen",
            _ext(EXT_CONSTRUCTOR_POS_ARGS, "subprocess", "Popen", [["touch", str(marker)]]),
        ),
        (
            "subprocess.Popen",
            _ext(EXT_CONSTRUCTOR_KW_ARGS, "subprocess", "Popen", {"args": ["touch", str(marker)]}),
        ),
        ("builtins.eval", _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "eval", touch)),
        ("builtins.exec", _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "exec", touch)),
        ("builtins.exec", _ext(EXT_METHOD_SINGLE_ARG, "builtins", "exec", touch, "__call__")),
        ("builtins.eval", _ext(EXT_PYDANTIC_V2, "builtins", "eval", {}, "model_validate_json")),
        (
            "importlib.import_module",
            _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "importlib", "import_module", "antigravity"),
        ),
        (
            "langgraph.checkpoint.serde.jsonplus.JsonPlusSerializer",
            _ext(
                EXT_CONSTRUCTOR_KW_ARGS,
                "langgraph.checkpoint.serde.jsonplus",
                "JsonPlusSerializer",
                {"pickle_fallback": True},
            ),
        ),
    ]


def test_crafted_calls_are_refused_by_name_and_never_run(marker: Path) -> None:
    serde = StrictSerializer()
    for dotted, payload in _crafted(marker):
        call = ormsgpack.unpackb(payload, ext_hook=ormsgpack.Ext)
        in_list = ormsgpack.packb({"ok": [1, {"deep": call}]})
        in_app_class = _ext(EXT_CONSTRUCTOR_KW_ARGS, __name__, "Box", {"label": call, "level": 1})
        for value in (payload, in_list, in_app_class):
            with pytest.raises(UnsafeCheckpointValue, match=rf"type {dotted}\b") as info:
                serde.loads_typed(("msgpack", value))
            assert "Nothing was called" in str(info.value)
    assert not marker.exists()
    assert "antigravity" not in sys.modules


def test_pickle_rows_are_refused_without_unpickling(marker: Path) -> None:
    class Touch:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    import pickle

    with pytest.raises(UnsafeCheckpointValue, match="'pickle'"):
        StrictSerializer().loads_typed(("pickle", pickle.dumps(Touch())))
    assert not marker.exists()


def test_crafted_rows_in_the_database_are_refused_on_read(tmp_path: Path, marker: Path) -> None:
    path = tmp_path / "x.db"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": {"text": "harmless"}}  # a value row (scalars are inline)
    cp["channel_versions"] = {"v": "1"}
    with TrajectorySaver(path) as saver:
        stored = saver.put(config, cp, {"source": "loop", "step": 0}, {"v": "1"})
    crafted = [("msgpack", _crafted(marker)[0][1], "os.system"), ("pickle", b"\x80", "'pickle'")]
    for type_, value, named in crafted:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE checkpoint_blobs SET type = ?, value = ?", (type_, value))
        with TrajectorySaver(path) as saver:
            with pytest.raises(UnsafeCheckpointValue, match=named):
                saver.get_tuple(stored)
    assert not marker.exists()


def test_a_class_of_a_module_not_imported_is_refused_and_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    (tmp_path / "unimported_app_types.py").write_text(
        "import dataclasses, pathlib\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "@dataclasses.dataclass\n"
        "class Thing:\n"
        "    x: int\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    payload = _ext(EXT_CONSTRUCTOR_KW_ARGS, "unimported_app_types", "Thing", {"x": 1})
    with pytest.raises(UnsafeCheckpointValue, match="unimported_app_types.Thing.*not imported"):
        StrictSerializer().loads_typed(("msgpack", payload))
    assert "unimported_app_types" not in sys.modules
    assert not marker.exists()


def test_imported_non_data_classes_and_missing_names_are_refused() -> None:
    serde = StrictSerializer()
    for module, name in [("pytest", "MonkeyPatch"), (__name__, "_ext"), (__name__, "Nope")]:
        payload = _ext(EXT_CONSTRUCTOR_SINGLE_ARG, module, name, 1)
        with pytest.raises(UnsafeCheckpointValue, match=rf"type {module}.{name}\b"):
            serde.loads_typed(("msgpack", payload))


def test_app_data_classes_round_trip_with_no_configuration() -> None:
    serde = StrictSerializer()
    value = {
        "card": Card(
            box=Box("a", Level.HIGH),
            pair=Pair(1, 2),
            tags={"x"},
            when=datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.UTC),
            ident=uuid.UUID(int=7),
        ),
        "level": Level.LOW,
        "boxes": [Box("b", Level.LOW)],
        "messages": [HumanMessage("hi"), AIMessage("hello")],
        "send": Send("node", {"k": 1}),
        "path": Path("/tmp/x"),
    }
    back = serde.loads_typed(serde.dumps_typed(value))
    assert back == value
    assert type(back["card"].box) is Box and back["card"].box.level is Level.HIGH
    assert type(back["card"].pair) is Pair and type(back["level"]) is Level


def test_allowed_types_admit_classes_the_rule_does_not() -> None:
    value = [http.HTTPStatus.OK]
    with pytest.raises(DefinitionError, match=r"http\.HTTPStatus.*allowed_types"):
        StrictSerializer().dumps_typed(value)
    stored = StrictSerializer(allowed_types=[http.HTTPStatus]).dumps_typed(value)
    with pytest.raises(UnsafeCheckpointValue, match=r"http\.HTTPStatus"):
        StrictSerializer().loads_typed(stored)
    for serde in (
        StrictSerializer(allowed_types=[("http", "HTTPStatus")]),
        StrictSerializer().with_msgpack_allowlist([http.HTTPStatus]),
    ):
        assert serde.loads_typed(stored) == value
    plain = StrictSerializer()
    assert plain.with_msgpack_allowlist([]) is plain


def test_values_that_could_not_be_read_back_fail_when_written() -> None:
    @dataclasses.dataclass
    class Local:
        x: int

    class Opaque:
        pass

    serde = StrictSerializer()
    with pytest.raises(DefinitionError, match=r"Local.*module level"):
        serde.dumps_typed({"v": [Local(1)]})
    with pytest.raises(DefinitionError, match=r"Local.*module level"):
        StrictSerializer(allowed_types=[Local]).dumps_typed(Local(1))
    with pytest.raises(DefinitionError, match="Opaque"):
        serde.dumps_typed(Opaque())


def test_a_trusted_type_that_no_longer_accepts_its_data_comes_back_as_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = _ext(EXT_CONSTRUCTOR_KW_ARGS, __name__, "Box", {"label": "a", "renamed": 1})
    assert StrictSerializer().loads_typed(("msgpack", payload)) == {"label": "a", "renamed": 1}
    assert "Could not rebuild" in caplog.text


def test_a_crafted_inline_value_in_a_checkpoint_row_is_refused(
    tmp_path: Path, marker: Path
) -> None:
    """Small scalars live inside the checkpoint row itself: a row rewritten to hold a callable
    there is refused like a crafted value row."""
    path = tmp_path / "x.db"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_values"] = {"n": 1}
    cp["channel_versions"] = {"n": "1"}
    with TrajectorySaver(path) as saver:
        stored = saver.put(config, cp, {"source": "loop", "step": 0}, {"n": "1"})
        assert saver.get_tuple(stored).checkpoint["channel_values"] == {"n": 1}  # type: ignore[union-attr]
    with sqlite3.connect(path) as conn:
        (blob,) = conn.execute("SELECT checkpoint FROM checkpoints").fetchone()
        shape = ormsgpack.unpackb(blob)
        assert shape["channel_values"] == {"n": 1}
        call = ormsgpack.unpackb(_crafted(marker)[0][1], ext_hook=ormsgpack.Ext)
        shape["channel_values"] = {"n": call}
        conn.execute("UPDATE checkpoints SET checkpoint = ?", (ormsgpack.packb(shape),))
    with TrajectorySaver(path) as saver, pytest.raises(UnsafeCheckpointValue, match="os.system"):
        saver.get_tuple(stored)
    assert not marker.exists()
