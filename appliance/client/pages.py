"""Keyset-paged lists (``{"items": [...], "next_cursor": …}``, the API's convention)."""

from __future__ import annotations

from appliance.client.http import Client, JsonObject, JsonValue, Params

PAGE_MAX = 200  # the API's largest `limit`


def read_list(
    client: Client, path: str, params: Params, *, limit: int, every_page: bool
) -> JsonObject:
    """One page of ``limit`` items, or with ``every_page`` all of them (pages of
    PAGE_MAX followed to the end): the API's page shape either way, ``next_cursor``
    null once everything was read."""
    if not every_page:
        return client.get(path, params={**params, "limit": limit}).object()
    items: list[JsonValue] = []
    cursor: JsonValue = None
    while True:
        paging: dict[str, str | int] = {"limit": PAGE_MAX}
        if isinstance(cursor, str):
            paging["cursor"] = cursor
        page = client.get(path, params={**params, **paging}).object()
        found = page.get("items")
        items.extend(found if isinstance(found, list) else [])
        cursor = page.get("next_cursor")
        if not isinstance(cursor, str) or not cursor:
            return {"items": items, "next_cursor": None}
