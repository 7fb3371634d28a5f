"""The trainer venvs' requirements (tests/train/trainer_venv.py, built by tests/setup.sh):
the trainer's extra and the project's dependencies as pyproject.toml lists them now."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.train import trainer_venv


@pytest.mark.parametrize(
    ("trainer", "package"), [("verl", "verl"), ("swift", "ms-swift"), ("areal", "areal")]
)
def test_requirements_follow_pyproject(trainer: str, package: str) -> None:
    project = tomllib.loads((trainer_venv.ROOT / "pyproject.toml").read_text())["project"]
    wanted = trainer_venv.requirements(trainer)
    extra = project["optional-dependencies"][f"train-{trainer}"]  # AReaL's is empty
    assert wanted == trainer_venv.TEST_PINS[trainer] + extra + project["dependencies"]
    assert any(r.startswith(f"{package}==") for r in wanted)  # the trainer, at its version
    assert not any(r.startswith(("transformers", "trl")) for r in wanted)  # the trainer's pins


def test_a_missing_venv_is_not_up_to_date_and_usage_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWORLD_GRAPH_TRAINER_VENVS", str(tmp_path))
    assert trainer_venv.venv_dir("verl") == tmp_path / "train-verl-venv"
    assert not trainer_venv.up_to_date("verl")
    assert trainer_venv.main(["trl"]) == 2
    assert "usage: python -m tests.train.trainer_venv verl swift" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing built for a wrong name
