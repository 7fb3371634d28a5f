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
"""

from __future__ import annotations

from ._secrets import (
    REDACTED,
    is_secret_key,
    may_hold_secrets,
    register_secret,
    scrub_text,
    strip_secrets,
)

__all__ = [
    "REDACTED",
    "is_secret_key",
    "may_hold_secrets",
    "register_secret",
    "scrub_text",
    "strip_secrets",
]
