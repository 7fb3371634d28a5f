"""verl's agent loop managers and its V1 trainer's worker on Ray (verl's venv, the scripts of
tests/train/test_verl_resume.py), run here so that their local Ray instance and verl's
TransferQueue are inside the loopback-only network namespace, as every Ray test is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.train.test_verl_resume import (
    Scripted,
    killed_mid_way_resumes,
    managers_give_their_ray_workers_the_samples_steps,
    model_dir,
    scripted,
)

__all__ = ["model_dir", "scripted"]  # the fixtures, for the tests here

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_verls_managers_give_their_ray_workers_the_samples_steps(
    scripted: tuple[Scripted, str], model_dir: Path, tmp_path: Path
) -> None:
    managers_give_their_ray_workers_the_samples_steps(scripted, model_dir, tmp_path)


def test_a_verl_v1_rollout_killed_mid_way_resumes_its_episodes(
    scripted: tuple[Scripted, str], model_dir: Path, tmp_path: Path
) -> None:
    killed_mid_way_resumes(scripted, model_dir, tmp_path, "v1", ["i10-n0", "i11-n0"])
