"""The store routes (``/store/items``, ``/store/items/search``, ``/store/namespaces``), as
LangGraph's server answers them, over the server's :class:`~._item_store.ItemStore` (table
``store_items`` of the checkpoint store).

A namespace is a list of 1 to 16 labels, each 1 to 256 characters without ``.`` or NUL (in
``GET /store/items`` the labels joined by ``.``); an item's first label is not ``langgraph``;
a key is 1 to 1024 characters. An item asked for a time to live (``ttl``) is a 422: items
are kept until deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field
from starlette.requests import Request
from starlette.responses import Response

from ._input import Count, _Body, validate
from ._item_store import ItemStore
from ._thread_routes import EXACT
from ._wire import ApiError, clean

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["StoreRoutes"]

MAX_LABELS = 16
"""The most labels a namespace may have."""


def _labels(value: list[str]) -> list[str]:
    for label in value:
        if not label or "." in label or "\x00" in label or len(label) > 256:
            raise ValueError(
                f"label {ascii(label[:40])} must be 1 to 256 characters without '.' or NUL"
            )
    return value


def _item_root(value: list[str]) -> list[str]:
    if value[0] == "langgraph":
        raise ValueError("the first label may not be 'langgraph' (LangGraph keeps it for itself)")
    return value


Namespace = Annotated[
    list[Annotated[str, Field(strict=True)]],
    Field(max_length=MAX_LABELS),
    AfterValidator(_labels),
]
ItemNamespace = Annotated[Namespace, Field(min_length=1), AfterValidator(_item_root)]
"""The namespace an item is put in: at least one label, not under ``langgraph``."""
Key = Annotated[str, Field(strict=True, min_length=1, max_length=1024)]


def _no_true(value: bool) -> bool:
    if value:
        raise ValueError("must be false (not searchable) or a list of paths to index")
    return value


class StorePut(_Body):
    """``PUT /store/items``."""

    model_config = EXACT

    namespace: ItemNamespace
    key: Key
    value: dict[str, Any]
    index: (
        Annotated[bool, Field(strict=True), AfterValidator(_no_true)]
        | list[Annotated[str, Field(strict=True)]]
        | None
    ) = None
    ttl: None = None  # a time to live is refused before (items are kept until deleted)


class StoreDelete(_Body):
    """``DELETE /store/items``."""

    model_config = EXACT

    namespace: Namespace = []
    key: Key


class StoreSearch(_Body):
    """``POST /store/items/search``."""

    model_config = EXACT

    namespace_prefix: Namespace | None = None
    filter: dict[str, Any] | None = None
    limit: Count = 10
    offset: Count = 0
    query: Annotated[str, Field(strict=True, max_length=4096)] | None = None
    refresh_ttl: bool | None = None


class StoreNamespaces(_Body):
    """``POST /store/namespaces``."""

    model_config = EXACT

    prefix: Namespace | None = None
    suffix: Namespace | None = None
    max_depth: Annotated[int, Field(strict=True, ge=1, le=MAX_LABELS)] | None = None
    limit: Count = 100
    offset: Count = 0


_FILTER_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _check_filter(value: Any, field: str = "filter") -> None:
    """A 422 naming an operator of ``filter`` the store does not know."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if str(key).startswith("$") and key not in _FILTER_OPS:
                raise ApiError(
                    422,
                    "invalid_field",
                    f"{field}: operator {key!r} is not one of {', '.join(_FILTER_OPS)}",
                )
            _check_filter(inner, f"{field}.{key}")


class StoreRoutes:
    """Handlers for ``/store/…``."""

    def __init__(self, app: App, store: ItemStore) -> None:
        self.app = app
        self.store = store

    def rows(self) -> Rows:
        return [
            ("/store/items", self.put, ["PUT"]),
            ("/store/items", self.get, ["GET"]),
            ("/store/items", self.delete, ["DELETE"]),
            ("/store/items/search", self.search, ["POST"]),
            ("/store/namespaces", self.namespaces, ["POST"]),
        ]

    async def put(self, request: Request) -> Response:
        body = await self.app.body(request)
        if body.get("ttl") is not None:
            raise ApiError(
                422,
                "unsupported_option",
                "ttl is not served: items are kept until deleted (DELETE /store/items)",
            )
        validate(StorePut, body)
        await self.store.aput(
            tuple(body["namespace"]), body["key"], body["value"], index=body.get("index")
        )
        return Response(status_code=204)

    async def get(self, request: Request) -> Response:
        query = request.query_params
        key = query.get("key") or ""
        labels = query.get("namespace", "").split(".")
        validate(StoreDelete, {"namespace": labels, "key": key})
        item = await self.store.aget(tuple(labels), key)
        return self.app.json(None if item is None else clean(item.dict()))

    async def delete(self, request: Request) -> Response:
        body = await self.app.checked(request, StoreDelete)
        await self.store.adelete(tuple(body.get("namespace") or ()), body["key"])
        return Response(status_code=204)

    async def search(self, request: Request) -> Response:
        body = await self.app.checked(request, StoreSearch)
        _check_filter(body.get("filter"))
        items = await self.store.asearch(
            tuple(body.get("namespace_prefix") or ()),
            query=body.get("query") or None,
            filter=body.get("filter"),
            limit=int(body.get("limit", 10)),
            offset=int(body.get("offset", 0)),
        )
        return self.app.json({"items": [clean(item.dict()) for item in items]})

    async def namespaces(self, request: Request) -> Response:
        body = await self.app.checked(request, StoreNamespaces)
        prefix, suffix = body.get("prefix"), body.get("suffix")
        found = await self.store.alist_namespaces(
            prefix=tuple(prefix) if prefix else None,
            suffix=tuple(suffix) if suffix else None,
            max_depth=body.get("max_depth"),
            limit=int(body.get("limit", 100)),
            offset=int(body.get("offset", 0)),
        )
        return self.app.json({"namespaces": [list(n) for n in found]})
