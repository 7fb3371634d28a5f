"""A2A push notifications: the task's webhooks, kept in the checkpoint store beside the
``runs`` table (table ``a2a_push_configs``, through the store's database layer, so on SQLite
and PostgreSQL alike and on the saver's own connections), and the task's state sent to them
by ``a2a-sdk``'s :class:`~a2a.server.tasks.BasePushNotificationSender` when a run of the task
ends or stops for input.

A webhook is an ``http`` or ``https`` URL without ``user:password@`` that the API key's
holder names; the server POSTs the task there (with the config's token in
``X-A2A-Notification-Token`` and its credentials, if any, as ``Authorization``).

The token and the credentials are secrets, and no secret is written to the store: they are
held in this server's memory only, and the table keeps a ``withheld`` marker in their place.
Credentials are never answered back (a config read over the API has them blank). A config
whose secrets a restarted server no longer holds is not sent to (its receiver would refuse
an unauthenticated POST, or take one it should not); set the config again to resume them.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.server.tasks import BasePushNotificationSender, PushNotificationConfigStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError

from ..checkpoint import Tx

__all__ = ["PushConfigs", "push"]

_COLUMNS = ("task_id", "id", "url", "token", "scheme", "credentials")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM a2a_push_configs"
_TIMEOUT = 10.0
"""Seconds a webhook has to answer one notification."""
WITHHELD = "withheld"
"""What the table holds where a config had a token or credentials (kept in memory only)."""

log = logging.getLogger("aworld_graph.server")


def _create(tx: Tx) -> None:
    columns = ", ".join(f"{name} TEXT" for name in _COLUMNS)
    tx.run(f"CREATE TABLE IF NOT EXISTS a2a_push_configs ({columns}, PRIMARY KEY (task_id, id))")


def _config(
    row: tuple[Any, ...], secrets: tuple[str, str], *, credentials: bool
) -> pb.TaskPushNotificationConfig:
    task_id, ident, url, _, scheme, _ = row
    token, secret = secrets
    config = pb.TaskPushNotificationConfig(task_id=task_id, id=ident, url=url, token=token)
    if scheme:
        config.authentication.scheme = scheme
        config.authentication.credentials = secret if credentials else ""
    return config


def checked_url(url: str) -> str:
    """``url`` when it is an absolute ``http``/``https`` URL, else an invalid-params error."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParamsError(
            message=f"the push notification url must be an http(s) URL; got {ascii(url[:80])}"
        )
    if parts.username is not None or parts.password is not None:  # kept, answered, logged
        raise InvalidParamsError(
            message="the push notification url may not carry credentials (user:password@); "
            "send them as the config's authentication (kept to send, never answered back)"
        )
    return url


class PushConfigs(PushNotificationConfigStore):
    """The SDK's push config store over the ``a2a_push_configs`` table of a store's
    ``database`` (made here if it is not there yet)."""

    def __init__(self, database: Any) -> None:
        self.database = database
        self.secrets: dict[tuple[str, str], tuple[str, str]] = {}
        """``(task_id, config id)`` → ``(token, credentials)``: in memory only."""
        database.each(_create)

    async def set_info(
        self, task_id: str, notification_config: pb.TaskPushNotificationConfig, context: Any
    ) -> pb.TaskPushNotificationConfig:
        config = normalize_push_notification_config(task_id, notification_config)
        checked_url(config.url)
        auth = config.authentication
        held = bool(config.token or auth.credentials)
        self.secrets[(task_id, config.id)] = (config.token, auth.credentials)
        marker = WITHHELD if held else ""
        values = [task_id, config.id, config.url, marker, auth.scheme, marker]
        sql = (
            f"INSERT INTO a2a_push_configs ({', '.join(_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (task_id, id) DO UPDATE SET url = excluded.url, token = excluded.token, "
            "scheme = excluded.scheme, credentials = excluded.credentials"
        )
        await self.database.aeach(lambda tx: tx.run(sql, values))
        config.authentication.credentials = ""
        return config

    async def _rows(self, task_id: str) -> list[tuple[Any, ...]]:
        sql = f"{_SELECT} WHERE task_id = ? ORDER BY id"
        rows: list[tuple[Any, ...]] = await self.database.aeach(lambda tx: tx.all(sql, [task_id]))
        return rows

    def _secrets(self, row: tuple[Any, ...]) -> tuple[str, str] | None:
        """The row's token and credentials; ``None`` when they were withheld from the store
        and this server does not hold them (it restarted since they were set)."""
        held = self.secrets.get((row[0], row[1]))
        if held is not None:
            return held
        return None if WITHHELD in (row[3], row[5]) else ("", "")

    async def get_info(self, task_id: str, context: Any) -> list[pb.TaskPushNotificationConfig]:
        rows = await self._rows(task_id)
        return [_config(r, self._secrets(r) or ("", ""), credentials=False) for r in rows]

    async def get_info_for_dispatch(self, task_id: str) -> list[pb.TaskPushNotificationConfig]:
        configs = []
        for row in await self._rows(task_id):
            secrets = self._secrets(row)
            if secrets is None:
                log.warning(
                    "A2A push config %s of task %s is not sent: its token or credentials were "
                    "set before this server started and are not stored; set the config again",
                    row[1],
                    row[0],
                )
                continue
            configs.append(_config(row, secrets, credentials=True))
        return configs

    async def delete_info(self, task_id: str, context: Any, config_id: str | None = None) -> None:
        sql, params = "DELETE FROM a2a_push_configs WHERE task_id = ?", [task_id]
        if config_id is not None:
            sql, params = f"{sql} AND id = ?", [task_id, config_id]
        await self.database.aeach(lambda tx: tx.run(sql, params))
        for key in [k for k in self.secrets if k[0] == task_id and config_id in (None, k[1])]:
            del self.secrets[key]


async def push(configs: PushConfigs, task: pb.Task) -> None:
    """Send ``task`` to its webhooks (best effort: a webhook that fails is logged by the
    SDK's sender, and the task goes on)."""
    if not await configs.get_info_for_dispatch(task.id):
        return
    async with httpx.AsyncClient(timeout=_TIMEOUT) as http:
        await BasePushNotificationSender(http, configs).send_notification(task.id, task)
