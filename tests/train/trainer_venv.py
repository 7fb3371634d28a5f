"""Virtual environments of their own for the trainers that cannot live beside this project's
``transformers``/``trl`` (verl pins ``transformers<5.11``; ms-swift ``transformers<5.20`` and
``trl<1``): built once (pip adds what a change of the lists below needs) under the repository's ignored ``.cache/`` from PyPI, with CPU torch,
the trainer, the packages this project imports, and this checkout on its path (no deps).

``python -m tests.train.trainer_venv verl`` builds one ahead of the tests (minutes).
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]

PROJECT_DEPS = [
    "langgraph>=1.2.24",
    "langgraph-checkpoint>=4.3.2",
    "networkx>=3.2",
    "pydantic>=2.11",
    "mcp>=2.3.0",
    "openai>=3.57.0",
    "sqlite-utils>=4.2.1",
    "click>=8.1",
    "pyyaml>=6.0",
    "rich>=13.0",
    "httpx>=0.28",
    "jsonschema>=4.20",
    "regex>=2023.0",
]
"""This project's own dependencies (pyproject.toml ``dependencies``): it goes in ``--no-deps``
so that nothing of its ``train`` extra pulls the trainer's pins."""

TRAINERS: dict[str, list[str]] = {
    # torch 2.13.0 is the CPU wheel this machine's pip finds (the global env's); verl's base
    # requirements do not pin torch (only its vllm/sglang/fsdp extras do, to CUDA builds)
    # cachetools and fastapi: what verl's agent loop imports from its `verl-core` extra (the
    # rest of that extra wants CUDA builds); gguf: transformers reads the SmolLM2 tokenizer
    "verl": ["torch==2.13.0", "verl==0.9.1", "cachetools", "fastapi", "gguf>=0.19"],
    "swift": ["torch==2.13.0", "ms-swift==4.6.0", "gguf>=0.19"],
}
"""Trainer → what its venv holds besides the project."""


class Unavailable(RuntimeError):
    """The trainer's venv cannot be built here (PyPI out of reach); the message says why."""


def venv_dir(trainer: str) -> Path:
    return ROOT / ".cache" / f"train-{trainer}-venv"


def trainer_python(trainer: str) -> Path:
    """The venv's python for ``trainer``, built on first use (the log is ``install.log`` in
    the venv). Raises :class:`Unavailable` when PyPI cannot be reached."""
    folder = venv_dir(trainer)
    python = folder / "bin" / "python"
    want = "\n".join(TRAINERS[trainer] + PROJECT_DEPS)
    ready = folder / "installed.txt"
    if ready.exists() and ready.read_text() == want and python.exists():
        _install_project(python, folder)
        return python
    try:
        httpx.head(f"https://pypi.org/simple/{TRAINERS[trainer][-1].split('=')[0]}/", timeout=10)
    except httpx.TransportError as exc:
        raise Unavailable(f"PyPI cannot be reached to install {trainer}: {exc}") from exc
    if not python.exists():
        venv.create(folder, with_pip=True)
    with (folder / "install.log").open("ab") as log:
        subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
            + TRAINERS[trainer]
            + PROJECT_DEPS,
            check=True,
            timeout=1800,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    _install_project(python, folder)
    ready.write_text(want)
    return python


def _install_project(python: Path, folder: Path) -> None:
    """This checkout on the venv's path (a ``.pth`` file: the venv runs the code under test,
    and nothing is built into the repository)."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "aworld_graph_checkout.pth").write_text(f"{ROOT}\n")


if __name__ == "__main__":
    print(trainer_python(sys.argv[1]))
