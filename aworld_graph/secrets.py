"""Secrets kept out of what the project writes: checkpoints, exports, logs, CLI output, traces.

* :func:`register_secret` – a configured secret value (an API key, a header value): every
  text scrubbed from then on has it replaced with :data:`REDACTED`. Models and sandboxes
  register theirs when they are built; register your own the same way.
* :func:`scrub_text` – a text with registered values and credential-shaped substrings
  (``Bearer …``, ``sk-…``, GitHub, Slack and AWS key formats) replaced.
* :func:`strip_secrets` – a copy of a value (mappings, lists) without credential-named keys
  (``api_key``, ``Authorization``, ``password``…; usage counters such as ``prompt_tokens``
  stay), an MCP server entry's ``env`` and secret values; a tool call's ``arguments`` JSON
  is stripped inside.
* :func:`may_hold_secrets` – ``False`` when a value's JSON text has nothing
  :func:`strip_secrets` would remove (a quick scan that may say ``True`` for nothing).
* :func:`is_secret_key` – whether a mapping key names a credential.

A key is secret when its name looks like a credential (``api_key``, ``llm_api_key``,
``Authorization``, ``access_token``, ``client_secret``, ``password``…). Counters that merely
contain the word *token* (``prompt_tokens``, ``max_tokens``, ``token_count``) are kept: usage
records need them. The ``env`` mapping of an MCP server entry (a dict with ``command``,
``args``, ``url`` or ``transport``) is dropped whole, and credential-shaped substrings of any
string (``Bearer …``, ``sk-…``, GitHub, Slack and AWS key formats) are replaced, even under an
innocent key or inside a longer text.

Secret *values* the project was configured with (the LLM API key, MCP header values and
credential-like ``env`` values) are registered with :func:`register_secret` when a model or
sandbox is built; from then on every scrubbed text has them replaced wherever they appear
(an endpoint echoing the key into an error message, a server printing its token). A tool
call's ``arguments`` JSON string is decoded, stripped by the same key rule and encoded again,
so ``{"password": …}`` is dropped there as in any mapping.

Log records of this library and of the packages it drives (``mcp``, ``openai``, ``httpx``,
``langgraph``, ``uvicorn``…) are scrubbed as they are made, message and traceback, whatever
handlers the application configures (see :func:`scrub_log_records`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = [
    "REDACTED",
    "is_secret_key",
    "may_hold_secrets",
    "mentions_registered_secret",
    "register_secret",
    "scrub_log_records",
    "scrub_text",
    "strip_secrets",
]

REDACTED = "[redacted]"
"""What a secret-looking string value is replaced with."""

_SECRET_KEY = re.compile(r"api[_-]?key|secret|password|passwd|authorization|credential", re.I)
_TOKEN = re.compile(r"token", re.I)
_TOKEN_COUNTER = re.compile(
    r"(prompt|completion|total|max|min|input|output|reasoning|cached|audio|num|n)_?tokens"
    r"|^tokens$|token_?(count|usage|limit|ids?)$|tokenizer",
    re.I,
)
_SECRET_VALUE = re.compile(
    r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"  # Authorization header values, anywhere in a text
    r"|\bsk-[A-Za-z0-9_\-]{12,}"  # OpenAI-style keys
    r"|\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|\bAKIA[0-9A-Z]{16}\b",  # AWS access key ids
    re.I,
)
_MCP_SERVER_KEYS = frozenset({"command", "args", "url", "transport"})
_SUSPECT = (
    *("api_key", "api-key", "apikey", "secret", "passw", "authoriz", "credential", "token"),
    *("bearer", "basic", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    *("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "akia", '"env"'),
)
"""Lower-case fragments of anything :func:`strip_secrets` would change (and more)."""


_MIN_KNOWN = 8
"""Shorter values are not registered: replacing a common short word everywhere would garble
texts, and a real key is longer."""
_TOKEN_SHAPED = re.compile(r"(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_\-.=+~]{16,}")
_known: frozenset[str] = frozenset()
_known_json: tuple[str, ...] = ()
_known_pattern: re.Pattern[str] | None = None
_known_lock = threading.Lock()


def register_secret(value: object, key: str | None = None) -> None:
    """Remember a configured secret value: every text scrubbed from now on has it replaced.

    With ``key`` (an ``env`` variable or header name) the value is registered only when the
    key names a credential (:func:`is_secret_key`) or the value is token-shaped (16+ letters
    and digits, no path or spaces), so ``PATH``-like values stay readable. ``Bearer abc…``
    registers the token alone too. Values under 8 characters are ignored.
    """
    global _known, _known_json, _known_pattern
    if not isinstance(value, str):
        return
    if key is not None and not (is_secret_key(key) or _TOKEN_SHAPED.fullmatch(value)):
        if not any(_TOKEN_SHAPED.fullmatch(part) for part in value.split()[1:]):
            return
    found = {value.strip(), *value.split()[1:]}
    found = {v for v in found if len(v) >= _MIN_KNOWN}
    with _known_lock:
        if found <= _known:
            return
        known = _known | found
        ordered = sorted(known, key=len, reverse=True)
        _known_pattern = re.compile("|".join(map(re.escape, ordered)))
        _known_json = tuple(json.dumps(v)[1:-1].lower() for v in ordered)
        _known = frozenset(known)


def scrub_text(text: str) -> str:
    """``text`` with registered secret values and credential-shaped substrings replaced."""
    pattern = _known_pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    if _SECRET_VALUE.search(text):
        text = _SECRET_VALUE.sub(REDACTED, text)
    return text


def may_hold_secrets(json_text: str | bytes) -> bool:
    """``False`` when the JSON text of a value has nothing :func:`strip_secrets` removes,
    so the value can be stored as is (substring scans of the text, cheaper than a deep copy
    or a regex with the same alternatives)."""
    if isinstance(json_text, bytes):
        json_text = json_text.decode("utf-8", "replace")
    text = json_text.lower()
    return any(fragment in text for fragment in _SUSPECT) or mentions_registered_secret(text)


def mentions_registered_secret(text: str) -> bool:
    """Whether (lower-cased JSON) ``text`` may contain a value given to :func:`register_secret`."""
    low = text.lower()
    return any(secret in low for secret in _known_json)


def is_secret_key(key: object) -> bool:
    """Whether a mapping key names a credential."""
    return isinstance(key, str) and _is_secret_name(key)


@lru_cache(maxsize=4096)
def _is_secret_name(key: str) -> bool:
    if _SECRET_KEY.search(key):
        return True
    return bool(_TOKEN.search(key)) and not _TOKEN_COUNTER.search(key)


_ATOMS = frozenset({int, float, bool, type(None), bytes})


def strip_secrets(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` (dicts, lists, tuples) with secret keys and values removed.

    Objects other than plain containers and strings are returned unchanged.
    """
    if _depth > 64:
        return value
    kind = type(value)  # exact types first: an ABC check per value costs more than the copy
    if kind is str:
        return scrub_text(value)
    if kind in _ATOMS:
        return value
    if kind is list:
        return [strip_secrets(item, _depth + 1) for item in value]
    if kind is dict or isinstance(value, Mapping):
        mcp_entry = "env" in value and any(k in value for k in _MCP_SERVER_KEYS)
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if (isinstance(key, str) and _is_secret_name(key)) or (mcp_entry and key == "env"):
                continue
            if key == "arguments" and isinstance(item, str):
                out[key] = _stripped_arguments(item, _depth)
                continue
            out[key] = item if type(item) in _ATOMS else strip_secrets(item, _depth + 1)
        return out
    if isinstance(value, list):
        return [strip_secrets(item, _depth + 1) for item in value]
    if isinstance(value, tuple):
        return tuple(strip_secrets(item, _depth + 1) for item in value)
    if isinstance(value, str):
        return scrub_text(value)
    return value


def _stripped_arguments(text: str, depth: int) -> str:
    """A tool call's JSON ``arguments`` with the same rule applied inside (kept as text)."""
    try:
        decoded = json.loads(text)
    except ValueError:
        return scrub_text(text)
    if not isinstance(decoded, (dict, list)):
        return scrub_text(text)
    stripped = strip_secrets(decoded, depth + 1)
    return text if stripped == decoded else json.dumps(stripped, ensure_ascii=False)


SCRUBBED_LOGGERS = ("aworld_graph", "mcp", "openai", "httpx", "httpcore", "langgraph", "uvicorn")
"""Loggers (and their children) whose records :func:`scrub_log_records` scrubs."""


def _scrub_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it when the record is emitted
        return
    record.msg, record.args = scrub_text(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = scrub_text("".join(traceback.format_exception(*record.exc_info)))
    if record.stack_info:
        record.stack_info = scrub_text(record.stack_info)


def scrub_log_records() -> None:
    """Make every record of :data:`SCRUBBED_LOGGERS` scrubbed when it is created (done once
    on import; the factory in place before is kept and called first)."""
    made = logging.getLogRecordFactory()
    if getattr(made, "scrubs_secrets", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = made(*args, **kwargs)
        name = record.name
        if name.startswith(SCRUBBED_LOGGERS) and name.partition(".")[0] in SCRUBBED_LOGGERS:
            _scrub_record(record)
        return record

    factory.scrubs_secrets = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


scrub_log_records()
