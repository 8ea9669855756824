"""The Notion fake's workspace in memory: pages (their properties checked against their parent's), blocks in
order under their page or block, data sources and comments; how tests seed them (`add_page`, `add_data_source`)
and read them (`page`, `tree`, `page_markdown`, `created_pages`). `NotionFake` (fake.py) sets these attributes;
`Endpoints` (endpoints.py) answers from them."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fakes.notion.content import _kind, _plain, _rich, _rough
from fakes.notion.errors import Invalid, _not_found

BOT = {"object": "user", "id": "00000000-0000-4000-8000-000000000b07"}
EMPTY = {"title": [], "rich_text": [], "multi_select": [], "people": [], "relation": [], "files": [], "checkbox": False}


@dataclass(frozen=True)
class CreatedPage:
    """A page made through the API; ids as 32 hex digits, as Notion URLs and labbot.toml write them."""

    id: str
    parent_id: str
    title: str
    url: str
    in_trash: bool


def _id(value: Any) -> str:
    hex32 = str(value).replace("-", "").lower()
    if not re.fullmatch(r"[0-9a-f]{32}", hex32):
        raise Invalid(f"path failed validation: {value!r} should be a valid uuid")
    return str(uuid.UUID(hex32))


class NotionStore:
    """Pages, blocks, data sources and comments; `NotionFake.__init__` sets these attributes."""

    pages: dict[str, dict[str, Any]]
    blocks: dict[str, dict[str, Any]]
    children: dict[str, list[str]]
    data_sources: dict[str, dict[str, Any]]
    comments: list[dict[str, Any]]
    _created: list[str]
    _lock: threading.RLock
    _clock: Iterator[int]

    # ----------------------------------------------------------------- seeding and reading (tests)

    def add_data_source(self, title: str, schema: dict[str, str]) -> str:
        """A data source with properties ``{name: type}`` (one of them of type ``title``); returns its id."""
        ds, database = str(uuid.uuid4()), str(uuid.uuid4())
        props = {n: {"id": f"p{i}", "name": n, "type": t, t: {}} for i, (n, t) in enumerate(schema.items())}
        where = {"type": "database_id", "database_id": database}
        url = f"https://www.notion.so/{database.replace('-', '')}"
        with self._lock:
            source = {"object": "data_source", "id": ds, "title": _rich([{"text": {"content": title}}])}
            self.data_sources[ds] = source | {"properties": props, "parent": where, "url": url, **self._stamps()}
        return ds

    def add_page(
        self,
        page_id: str | None = None,
        title: str = "Untitled",
        *,
        parent: str | None = None,
        properties: dict[str, Any] | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str:
        """A page (with ``page_id``, dashed or not, or a new id) under ``parent`` (a page id, a data source id, or
        None: the workspace), with ``properties`` (request form, for a data source row) and content ``blocks``
        (request form; any block type, unchecked); returns its id, dashed."""
        with self._lock:
            if parent is None:
                where: dict[str, Any] = {"type": "workspace", "workspace": True}
            elif _id(parent) in self.data_sources:
                where = {"type": "data_source_id", "data_source_id": _id(parent)}
            else:
                where = {"type": "page_id", "page_id": self._page(parent)["id"]}
            props = {**(properties or {}), self._title_name(where): {"title": [{"text": {"content": title}}]}}
            pid = self._new_page(where, props, _id(page_id) if page_id else None)
            self._store(pid, "page_id", blocks or [])
            return pid

    def page(self, page_id: str) -> dict[str, Any]:
        with self._lock:
            return self._page(page_id)

    def created_pages(self) -> list[CreatedPage]:
        """The pages created through the API (``POST /v1/pages``), in order, trashed ones included."""
        with self._lock:
            return [self._created_page(self.pages[pid]) for pid in self._created]

    def page_markdown(self, page_id: str) -> str:
        """A page's content as rough Markdown (headings, list items, code, the text of everything else), for
        assertions on what was written; labbot's own renderer is what is under test elsewhere."""
        with self._lock:
            return "\n".join(_rough(self.tree(page_id)))

    def tree(self, parent_id: str) -> list[dict[str, Any]]:
        """The blocks under a page or block, each with its ``children`` attached."""
        with self._lock:
            return [{**self.blocks[b], "children": self.tree(b)} for b in self.children.get(_id(parent_id), [])]

    # ----------------------------------------------------------------- the store

    def _stamps(self) -> dict[str, Any]:
        when = datetime(2025, 9, 3, tzinfo=UTC) + timedelta(seconds=next(self._clock))
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        return {"created_time": stamp, "last_edited_time": stamp, "created_by": BOT, "last_edited_by": BOT}

    def _page(self, page_id: str) -> dict[str, Any]:
        if (pid := _id(page_id)) not in self.pages:
            raise _not_found("page", pid)
        return self.pages[pid]

    def _source(self, source_id: str) -> dict[str, Any]:
        if (ds := _id(source_id)) not in self.data_sources:
            raise _not_found("data_source", ds)
        return self.data_sources[ds]

    def _title_name(self, parent: dict[str, Any]) -> str:
        if parent["type"] != "data_source_id":
            return "title"
        schema = self._source(parent["data_source_id"])["properties"]
        return next(n for n, p in schema.items() if p["type"] == "title")

    def _created_page(self, page: dict[str, Any]) -> CreatedPage:
        parent = page["parent"]
        where = str(parent.get(parent["type"])).replace("-", "")
        title = _plain(page["properties"][self._title_name(parent)]["title"])
        return CreatedPage(page["id"].replace("-", ""), where, title, page["url"], page["in_trash"])

    def _new_page(self, parent: dict[str, Any], props: dict[str, Any], pid: str | None = None) -> str:
        """A page (id ``pid``, or a new one) whose ``props`` (request form) are checked against its parent's."""
        if parent["type"] == "data_source_id":
            schema = self._source(parent["data_source_id"])["properties"]
        else:
            schema = {"title": {"id": "title", "name": "title", "type": "title"}}
        values = {n: {"id": p["id"], "type": p["type"], p["type"]: EMPTY.get(p["type"])} for n, p in schema.items()}
        for name, value in props.items():
            prop = schema.get(name) or next((p for p in schema.values() if p["id"] == name), None)
            if prop is None:
                raise Invalid(f"{name} is not a property that exists.")
            kind = prop["type"]
            if not isinstance(value, dict) or kind not in value:
                raise Invalid(f"{name} is expected to be {kind}.")
            values[prop["name"]][kind] = _rich(value[kind]) if kind in {"title", "rich_text"} else value[kind]
        pid = pid or str(uuid.uuid4())
        slug = re.sub(r"[^A-Za-z0-9]+", "-", _plain(values[self._title_name(parent)]["title"])).strip("-")
        url = f"https://www.notion.so/{slug + '-' if slug else ''}{pid.replace('-', '')}"
        page = {"object": "page", "id": pid, **self._stamps(), "parent": parent, "archived": False, "in_trash": False}
        self.pages[pid] = page | {"properties": values, "url": url}
        return pid

    def _store(self, parent_id: str, parent_type: str, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Blocks (request form) as Notion keeps them: ids, parents, rich text in answer form, ``has_children``."""
        made = []
        for block in blocks:
            kind = _kind(block)
            data = {k: v for k, v in block[kind].items() if k != "children"}
            for key in ("rich_text", "caption"):
                if key in data:
                    data[key] = _rich(data[key])
            if kind == "table_row":
                data["cells"] = [_rich(c) for c in data.get("cells", [])]
            kids = block[kind].get("children") or []
            bid = _id(block["id"]) if block.get("id") else str(uuid.uuid4())
            where = {"type": parent_type, parent_type: parent_id}
            stored = {"object": "block", "id": bid, "parent": where, **self._stamps(), "has_children": bool(kids)}
            self.blocks[bid] = stored | {"in_trash": False, "type": kind, kind: data}
            self.children.setdefault(parent_id, []).append(bid)
            self._store(bid, "block_id", kids)
            made.append(self.blocks[bid])
        if parent_id in self.blocks and made:
            self.blocks[parent_id]["has_children"] = True
        return made
