"""The Notion fake's answers to checked requests, over its store: search, pages (create, read, trash), block
children (list, append), comments and data sources (read, query with filters and sorts), in Notion's list form.
`NotionFake._answer` (fake.py) routes each ``(method, template)`` of the OpenAPI document to one of them."""

from __future__ import annotations

import uuid
from typing import Any

from fakes.notion.content import _check_blocks, _plain, _rich
from fakes.notion.errors import Invalid, _not_found
from fakes.notion.store import NotionStore, _id


class Endpoints(NotionStore):
    """The endpoints, each called with (path parameters, query, body), and their helpers; they raise `Invalid` or
    `NotFound`."""

    @staticmethod
    def _list(items: list[dict[str, Any]], page: dict[str, Any], kind: str) -> dict[str, Any]:
        """One page of a list answer; the cursor is the id of the first item of the next page."""
        size, cursor = int(page.get("page_size", 100)), page.get("start_cursor")
        if not 1 <= size <= 100:
            raise Invalid(f"page_size should be between 1 and 100, instead was {size}")
        ids = [i["id"] for i in items]
        if cursor is not None and cursor not in ids:
            raise Invalid(f"start_cursor {cursor!r} is not a cursor this list gave")
        start = ids.index(cursor) if cursor is not None else 0
        more = start + size < len(items)
        next_cursor = ids[start + size] if more else None
        results = items[start : start + size]
        return {"object": "list", "results": results, "next_cursor": next_cursor, "has_more": more, "type": kind}

    def _search(self, path: dict[str, str], query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        wanted, kind = str(body.get("query") or "").lower(), (body.get("filter") or {}).get("value")
        found = [p for p in self.pages.values() if not p["in_trash"]] + list(self.data_sources.values())
        found = [f for f in found if kind in (None, f["object"]) and wanted in self._title(f).lower()]
        found.sort(key=lambda f: f["last_edited_time"], reverse=True)
        return self._list(found, body, "page_or_data_source")

    def _title(self, obj: dict[str, Any]) -> str:
        if obj["object"] == "data_source":
            return _plain(obj["title"])
        return next(_plain(p["title"]) for p in obj["properties"].values() if p["type"] == "title")

    def _create_page(self, path: dict[str, str], query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        parent = body["parent"]
        kind = parent.get("type") or next((k for k in ("page_id", "data_source_id") if k in parent), None)
        if kind not in {"page_id", "data_source_id"} or kind not in parent:
            raise Invalid("parent should be a page_id or a data_source_id (integrations cannot make top-level pages)")
        target = self._page(parent[kind])["id"] if kind == "page_id" else self._source(parent[kind])["id"]
        children = body.get("children") or []
        if children:
            _check_blocks(children)
        page_id = self._new_page({"type": kind, kind: target}, body["properties"])
        self._store(page_id, "page_id", children)
        self._created.append(page_id)
        return self.pages[page_id]

    def _update_page(self, path: dict[str, str], query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        page = self._page(path["page_id"])
        if "in_trash" in body or "archived" in body:
            page["in_trash"] = page["archived"] = bool(body.get("in_trash", body.get("archived")))
        return page

    def _container(self, block_id: str) -> tuple[str, str]:
        """(id, "page_id" or "block_id") of something that has children."""
        bid = _id(block_id)
        if bid in self.pages or bid in self.blocks:
            return bid, "page_id" if bid in self.pages else "block_id"
        raise _not_found("block", bid)

    def _list_children(self, path: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
        parent, _ = self._container(path["block_id"])
        return self._list([self.blocks[b] for b in self.children.get(parent, [])], query, "block")

    def _append_children(self, path: dict[str, str], query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        parent, parent_type = self._container(path["block_id"])
        block = self.blocks.get(parent, {"type": "page"})
        _check_blocks(body["children"], 0, block["type"], (block.get("table") or {}).get("table_width"))
        made = self._store(parent, parent_type, body["children"])
        return {"object": "list", "results": made, "next_cursor": None, "has_more": False, "type": "block"}

    def _comment(self, path: dict[str, str], query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        page = self._page(body["parent"]["page_id"])
        where = {"type": "page_id", "page_id": page["id"]}
        comment: dict[str, Any] = {
            "object": "comment",
            "id": str(uuid.uuid4()),
            "parent": where,
            "discussion_id": str(uuid.uuid4()),
        }
        comment |= {**self._stamps(), "rich_text": _rich(body["rich_text"])}
        self.comments.append(comment)
        return comment

    def _query(self, path: dict[str, str], query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        ds = self._source(path["data_source_id"])["id"]
        rows = [p for p in self.pages.values() if p["parent"].get("data_source_id") == ds and not p["in_trash"]]
        if body.get("filter"):
            rows = [r for r in rows if self._matches(r, body["filter"])]
        for sort in reversed(body.get("sorts") or []):
            values = {r["id"]: self._value(r, sort["property"]) for r in rows}
            rows.sort(key=lambda r: (values[r["id"]] is None, values[r["id"]] or 0))
            if sort["direction"] == "descending":
                rows.reverse()
        return self._list(rows, body, "page_or_data_source")

    def _value(self, row: dict[str, Any], name: str) -> Any:
        """A row's property as a plain value (text, number, bool, a select's name, a date's start)."""
        prop = row["properties"].get(name) or next((p for p in row["properties"].values() if p["id"] == name), None)
        if prop is None:
            raise Invalid(f"Could not find property with name or id: {name}")
        value = prop[prop["type"]]
        if prop["type"] in {"title", "rich_text"}:
            return _plain(value)
        if prop["type"] == "multi_select":
            return [o["name"] for o in value]
        return (value.get("name") or value.get("start")) if isinstance(value, dict) else value

    def _matches(self, row: dict[str, Any], f: dict[str, Any]) -> bool:
        """Notion's filter object, for the conditions tests use: and/or, equals, contains, is_empty."""
        if "and" in f:
            return all(self._matches(row, g) for g in f["and"])
        if "or" in f:
            return any(self._matches(row, g) for g in f["or"])
        value = self._value(row, f["property"])
        condition = next(v for k, v in f.items() if k != "property")
        op, arg = next(iter(condition.items()))
        if op == "equals":
            return bool(value == arg)
        if op == "contains":
            return arg in (value or "")
        if op == "is_empty":
            return value in (None, "", [])
        raise Invalid(f"the Notion fake does not know the filter condition {op!r}")
