"""A2A push notifications: the task's webhooks, kept in the checkpoint store beside the
``runs`` table (table ``a2a_push_configs``, through the store's database layer, so on SQLite
and PostgreSQL alike and on the saver's own connections), and the task's state sent to them
by ``a2a-sdk``'s :class:`~a2a.server.tasks.BasePushNotificationSender` when a run of the task
ends or stops for input.

A webhook is an ``http`` or ``https`` URL without ``user:password@`` that the API key's
holder names; the server POSTs the task there (with the config's token in
``X-A2A-Notification-Token`` and its credentials, if any, as ``Authorization``). Credentials are kept to send them and never answered back: a
config read over the API has them blank.
"""

from __future__ import annotations

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


def _create(tx: Tx) -> None:
    columns = ", ".join(f"{name} TEXT" for name in _COLUMNS)
    tx.run(f"CREATE TABLE IF NOT EXISTS a2a_push_configs ({columns}, PRIMARY KEY (task_id, id))")


def _config(row: tuple[Any, ...], *, credentials: bool) -> pb.TaskPushNotificationConfig:
    task_id, ident, url, token, scheme, secret = row
    config = pb.TaskPushNotificationConfig(task_id=task_id, id=ident, url=url, token=token or "")
    if scheme:
        config.authentication.scheme = scheme
        config.authentication.credentials = (secret or "") if credentials else ""
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
        database.each(_create)

    async def set_info(
        self, task_id: str, notification_config: pb.TaskPushNotificationConfig, context: Any
    ) -> pb.TaskPushNotificationConfig:
        config = normalize_push_notification_config(task_id, notification_config)
        checked_url(config.url)
        auth = config.authentication
        values = [task_id, config.id, config.url, config.token, auth.scheme, auth.credentials]
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

    async def get_info(self, task_id: str, context: Any) -> list[pb.TaskPushNotificationConfig]:
        return [_config(r, credentials=False) for r in await self._rows(task_id)]

    async def get_info_for_dispatch(self, task_id: str) -> list[pb.TaskPushNotificationConfig]:
        return [_config(r, credentials=True) for r in await self._rows(task_id)]

    async def delete_info(self, task_id: str, context: Any, config_id: str | None = None) -> None:
        sql, params = "DELETE FROM a2a_push_configs WHERE task_id = ?", [task_id]
        if config_id is not None:
            sql, params = f"{sql} AND id = ?", [task_id, config_id]
        await self.database.aeach(lambda tx: tx.run(sql, params))


async def push(configs: PushConfigs, task: pb.Task) -> None:
    """Send ``task`` to its webhooks (best effort: a webhook that fails is logged by the
    SDK's sender, and the task goes on)."""
    if not await configs.get_info_for_dispatch(task.id):
        return
    async with httpx.AsyncClient(timeout=_TIMEOUT) as http:
        await BasePushNotificationSender(http, configs).send_notification(task.id, task)
