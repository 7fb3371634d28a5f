"""File tools confined to one root directory, for the bundled environment server.

Every path a model passes is resolved against the root with symlinks followed; anything that
lands outside the root – through ``..``, an absolute path or a link – is refused with a message
that says so. Results are bounded (entries, bytes, hits) so a big tree cannot flood the model,
and so is a search's time: patterns run on the ``regex`` engine with a deadline, so a pattern
that backtracks catastrophically (``(a+)+$`` against a long line) ends with a clear error
instead of holding the server.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import regex as re

__all__ = ["FileAccessError", "RootedFiles"]

MAX_READ_BYTES = 256_000
"""``read_file`` returns at most this many bytes of a file, and says so when it cuts."""
MAX_ENTRIES = 1_000
"""``list_files`` lists at most this many entries."""
MAX_HITS = 200
"""``search_files`` reports at most this many matches."""
MAX_SEARCH_FILE_BYTES = 2_000_000
"""Files larger than this are skipped by ``search_files``."""
SEARCH_SECONDS = 2.0
"""Time one ``search_files`` call may spend matching, over all files."""


class FileAccessError(ValueError):
    """A path is outside the root, missing, or not the kind of file the tool needs."""


@dataclass(frozen=True)
class RootedFiles:
    """List, read and search files under :attr:`root` and nowhere else."""

    root: Path
    """The directory the tools may see; resolved (symlinks followed) at construction."""
    search_seconds: float = SEARCH_SECONDS
    """Time one ``search_files`` call may spend matching, over all files."""

    @classmethod
    def at(
        cls, root: str | os.PathLike[str], *, search_seconds: float = SEARCH_SECONDS
    ) -> RootedFiles:
        """Confine file access to ``root`` (which must be an existing directory)."""
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise FileAccessError(f"root {str(root)!r} is not a directory; pass an existing one")
        return cls(root=resolved, search_seconds=search_seconds)

    def resolve(self, path: str) -> Path:
        """The real location of ``path`` (relative to the root), refused if outside the root."""
        if "\x00" in path:
            raise FileAccessError("path contains a NUL character")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = Path(os.path.realpath(candidate))
        if real != self.root and self.root not in real.parents:
            raise FileAccessError(
                f"path {path!r} is outside the environment root; "
                "use a path relative to the root, without '..' or links that leave it"
            )
        return real

    def _shown(self, real: Path) -> str:
        rel = real.relative_to(self.root).as_posix()
        return rel or "."

    def list_files(self, path: str = ".") -> str:
        """One line per entry of directory ``path``: directories end with ``/``, files show size."""
        real = self.resolve(path)
        if not real.is_dir():
            raise FileAccessError(f"{path!r} is not a directory; call list_files on a directory")
        lines: list[str] = []
        with os.scandir(real) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries[:MAX_ENTRIES]:
            if entry.is_dir():
                lines.append(f"{entry.name}/")
            elif entry.is_file():
                lines.append(f"{entry.name}  ({entry.stat().st_size} bytes)")
            else:
                lines.append(f"{entry.name}  (other)")
        if len(entries) > MAX_ENTRIES:
            lines.append(f"[{len(entries) - MAX_ENTRIES} more entries not shown]")
        return "\n".join(lines) if lines else f"{self._shown(real)} is empty"

    def read_file(self, path: str) -> str:
        """The text of file ``path`` (UTF-8; undecodable bytes replaced), cut at MAX_READ_BYTES."""
        real = self.resolve(path)
        if not real.is_file():
            kind = "a directory" if real.is_dir() else "missing"
            raise FileAccessError(f"{path!r} is {kind}; list_files shows the files there are")
        with real.open("rb") as handle:
            data = handle.read(MAX_READ_BYTES + 1)
        if b"\x00" in data[:8192]:
            raise FileAccessError(f"{path!r} looks like a binary file; only text files can be read")
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            size = real.stat().st_size
            text += f"\n[file cut: showing the first {MAX_READ_BYTES} of {size} bytes]"
        return text

    def search_files(self, pattern: str, path: str = ".") -> str:
        """Lines matching ``pattern`` (a regex, or plain text if not a valid regex; case-insensitive)
        in text files under ``path``, as ``file:line: text``; file names that match are listed too.
        """
        try:
            regex = re.compile(pattern, re.IGNORECASE)
        except (re.error, OverflowError, RecursionError):
            regex = re.compile(re.escape(pattern), re.IGNORECASE)
        start = self.resolve(path)
        if not start.is_dir():
            raise FileAccessError(f"{path!r} is not a directory; search_files searches a directory")
        hits: list[str] = []
        deadline = time.monotonic() + self.search_seconds
        for directory, dirnames, filenames in os.walk(start, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                if len(hits) >= MAX_HITS:
                    hits.append(f"[stopped after {MAX_HITS} matches; narrow the pattern or path]")
                    return "\n".join(hits)
                hits.extend(
                    self._search_one(Path(directory) / name, regex, MAX_HITS - len(hits), deadline)
                )
        return "\n".join(hits) if hits else f"no matches for {pattern!r} under {path!r}"

    def _search_one(
        self, file: Path, regex: re.Pattern[str], budget: int, deadline: float
    ) -> list[str]:
        try:
            real = self.resolve(str(file))
        except FileAccessError:
            return []  # a link that leaves the root: silently out of scope
        if not real.is_file() or real.stat().st_size > MAX_SEARCH_FILE_BYTES:
            return []
        shown = file.relative_to(self.root).as_posix()

        def matches(text: str, where: str) -> bool:
            try:
                return (
                    regex.search(text, timeout=max(deadline - time.monotonic(), 0.001)) is not None
                )
            except TimeoutError:
                raise FileAccessError(
                    f"search_files stopped: pattern {regex.pattern[:100]!r} took longer than "
                    f"{self.search_seconds:g} s (at {shown}{where}); it backtracks too much (nested "
                    "quantifiers such as (a+)+ or (.*)*): simplify it, or search for plain text"
                ) from None

        found: list[str] = [f"{shown}: (file name matches)"] if matches(file.name, "") else []
        data = real.read_bytes()
        if b"\x00" in data[:8192]:
            return found
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if len(found) >= budget:
                break
            if matches(line, f":{number}"):
                found.append(f"{shown}:{number}: {line.strip()[:300]}")
        return found
