"""Virtual environments of their own for the trainers that cannot live beside this project's
``transformers``/``trl``/``torch`` (verl pins ``transformers<5.11``; ms-swift
``transformers<5.20`` and ``trl<1``; AReaL ``torch<2.11``), under the repository's ignored
``.cache/`` (or ``$AWORLD_GRAPH_TRAINER_VENVS``): torch, the trainer's extra of
``pyproject.toml`` (``train-verl``, ``train-swift``, ``train-areal``), this project's
dependencies, and this checkout on its path (no deps, nothing built into it).

``tests/setup.sh`` builds them (``python -m tests.train.trainer_venv verl swift areal``:
minutes the first time, then a check of a file); a test that finds one missing or out of date
builds it on first use. pip adds only what a change of the requirements needs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import httpx

from tests.build_lock import building

ROOT = Path(__file__).resolve().parents[2]
NAME = "tests/train/trainer_venv.py"

TEST_PINS: dict[str, list[str]] = {
    # torch 2.13.0 is the CPU wheel this machine's pip finds (the global env's); verl's base
    # requirements do not pin torch (only its vllm/sglang/fsdp extras do, to CUDA builds).
    # The trainers' versions the adapters were written against; gguf: transformers reads the
    # SmolLM2 tokenizer from the embedded model's GGUF in the tests
    "verl": ["torch==2.13.0", "verl==0.9.1", "gguf>=0.19"],
    "swift": ["torch==2.13.0", "ms-swift==4.6.0", "gguf>=0.19"],
    # AReaL 1.0.4 requires torch<2.11: PyPI's Linux wheel of 2.10.0 is the CUDA build, which
    # runs on CPU too (the test drives AReaL's proxy and workflow, not its training engines;
    # the test writes the tokenizer folder, read from the GGUF by this project's transformers)
    "areal": ["torch==2.10.0", "areal==1.0.4"],
}
"""Trainer → what its venv holds besides its extra and the project's dependencies."""


class Unavailable(RuntimeError):
    """The trainer's venv cannot be built here (PyPI out of reach); the message says why."""


def venv_dir(trainer: str) -> Path:
    base = os.environ.get("AWORLD_GRAPH_TRAINER_VENVS")
    return (Path(base) if base else ROOT / ".cache") / f"train-{trainer}-venv"


def requirements(trainer: str) -> list[str]:
    """What ``trainer``'s venv holds: :data:`TEST_PINS`, the ``train-<trainer>`` extra and the
    project's dependencies, read from ``pyproject.toml`` (the project itself goes on the path
    with no deps, so nothing of its ``train`` extra pulls the trainer's pins)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return (
        TEST_PINS[trainer]
        + project["optional-dependencies"][f"train-{trainer}"]
        + project["dependencies"]
    )


def up_to_date(trainer: str) -> bool:
    """Whether ``trainer``'s venv exists and holds what :func:`requirements` lists now."""
    folder = venv_dir(trainer)
    ready = folder / "installed.txt"
    return (
        (folder / "bin" / "python").exists()
        and ready.exists()
        and ready.read_text() == "\n".join(requirements(trainer))
    )


def trainer_python(trainer: str) -> Path:
    """The venv's python for ``trainer``, built on first use (the log is ``install.log`` in
    the venv). Raises :class:`Unavailable` when PyPI cannot be reached and
    ``subprocess.CalledProcessError`` when pip fails."""
    folder = venv_dir(trainer)
    with building(folder):  # another test file's worker may be building it now
        return _built(trainer, folder, folder / "bin" / "python")


def _built(trainer: str, folder: Path, python: Path) -> Path:
    if up_to_date(trainer):
        _install_project(python)
        return python
    try:
        httpx.head(f"https://pypi.org/simple/{TEST_PINS[trainer][1].split('=')[0]}/", timeout=10)
    except httpx.TransportError as exc:
        raise Unavailable(f"PyPI cannot be reached to install {trainer}: {exc}") from exc
    if not python.exists():
        venv.create(folder, with_pip=True)
    wanted = requirements(trainer)
    with (folder / "install.log").open("ab") as log:
        subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", *wanted],
            check=True,
            timeout=1800,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    _install_project(python)
    (folder / "installed.txt").write_text("\n".join(wanted))
    return python


def _install_project(python: Path) -> None:
    """This checkout on the venv's path (a ``.pth`` file: the venv runs the code under test,
    and nothing is built into the repository)."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    pth = Path(site) / "aworld_graph_checkout.pth"
    if not pth.exists() or pth.read_text() != f"{ROOT}\n":
        pth.write_text(f"{ROOT}\n")


def main(trainers: list[str]) -> int:
    """Build or refresh each trainer's venv; print each one's python. A failure prints the
    end of pip's log on stderr and returns 1."""
    unknown = [t for t in trainers if t not in TEST_PINS]
    if not trainers or unknown:
        print(f"usage: python -m tests.train.trainer_venv {' '.join(TEST_PINS)}", file=sys.stderr)
        return 2
    for trainer in trainers:
        folder = venv_dir(trainer)
        if not up_to_date(trainer):
            print(f"{NAME}: installing {trainer} into {folder} (minutes)", file=sys.stderr)
        try:
            print(trainer_python(trainer))
        except Unavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        except subprocess.SubprocessError as exc:
            log = folder / "install.log"
            tail = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else []
            print("\n".join(tail), file=sys.stderr)
            print(f"{NAME}: could not install {trainer} into {folder}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
