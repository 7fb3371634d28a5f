"""Webhooks: a run created with ``webhook="http(s)://…"`` has its final JSON POSTed there when
it ends, as LangGraph's server sends it: the API's ``Run`` object with the run's end
``status``, ``run_started_at`` (here: when the run was accepted), ``run_ended_at``,
``webhook_sent_at``, the thread's ``values`` and, when it failed, ``error``; secrets
stripped as in every response. A run that stopped at a human step ended ``success`` (as in
LangGraph's server); its ``values`` hold the interrupts it waits on under ``__interrupt__``, as
``wait`` answers them.

A webhook is an absolute ``http`` or ``https`` URL without ``user:password@`` (a 422 naming
``webhook`` otherwise, before the run is stored). The server sends it from its event loop
once, within :data:`TIMEOUT` seconds, and logs a failure (naming the URL's host only); the
run's own end does not wait for it. The server POSTs wherever a caller names, loopback too:
with ``AWORLD_GRAPH_API_KEY`` set only callers holding the key can name one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlsplit

import httpx

from ._wire import ApiError, clean, now

__all__ = ["TIMEOUT", "Webhooks", "check_webhook"]

log = logging.getLogger("aworld_graph.server")

TIMEOUT = 30.0
"""Seconds a webhook's POST may take."""

MAX_URL = 4096


def check_webhook(url: Any, field: str = "webhook") -> str | None:
    """``url`` when it is an absolute http(s) URL (``None`` when none is given), else a 422
    naming ``field``."""
    if url is None or url == "":
        return None
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError(
            422,
            "invalid_field",
            f"{field} must be an absolute http:// or https:// URL, e.g. "
            f"'https://example.com/hook'; got {ascii(str(url)[:60])}",
        )
    if len(url) > MAX_URL:
        raise ApiError(422, "invalid_field", f"{field} is over {MAX_URL} characters")
    if parts.username is not None or parts.password is not None:  # stored and answered back
        raise ApiError(
            422,
            "invalid_field",
            f"{field} may not carry credentials (user:password@): the URL is stored with the "
            "run and answered back to whoever reads it; name the URL without them",
        )
    return str(url)


class Webhooks:
    """Sends the webhooks of runs that end, each in a task of the server's event loop."""

    def __init__(self) -> None:
        self.sending: set[asyncio.Task[None]] = set()
        """The POSTs under way (held so that none is collected before it is done)."""

    def ended(self, run: Any) -> None:
        """Send the webhook of ``run`` (a :class:`~._runs.Run` that has just ended), if it
        asked for one."""
        url = (run.kwargs or {}).get("webhook")
        if url:
            values = run.values
            if run.interrupts:  # it waits for a person: what it asks, as ``wait`` answers
                values = {**(values or {}), "__interrupt__": run.interrupts}
            self.send(str(url), run.json(), values, run.error, run.created_at)

    def send(self, url: str, run: dict[str, Any], values: Any, error: Any, started: str) -> None:
        """POST ``run`` (the API's ``Run`` object, its status the end one) to ``url``."""
        payload = {
            **run,
            "run_started_at": started,
            "run_ended_at": run.get("updated_at") or now(),
            "values": values,
        }
        if error is not None:
            payload["error"] = error
        task = asyncio.get_running_loop().create_task(self._post(url, clean(payload)))
        self.sending.add(task)
        task.add_done_callback(self.sending.discard)

    async def _post(self, url: str, payload: dict[str, Any]) -> None:
        payload["webhook_sent_at"] = now()
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as client:
                answer = await client.post(url, json=payload)
            if answer.status_code >= 400:
                log.warning(
                    "run %s: webhook %s answered %s",
                    payload.get("run_id"),
                    urlsplit(url).hostname,
                    answer.status_code,
                )
        except httpx.HTTPError as exc:
            log.warning(
                "run %s: webhook %s failed: %s", payload.get("run_id"), urlsplit(url).hostname, exc
            )

    async def close(self) -> None:
        """Wait for the webhooks under way (server shutdown)."""
        if self.sending:
            await asyncio.gather(*self.sending, return_exceptions=True)
