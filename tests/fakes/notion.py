"""Notion for labbot's tests: the public API (version 2025-09-03) over pages, blocks, data sources and comments kept
in memory, as a Starlette app.

Use it in process (``httpx.ASGITransport(fake.app)``, or ``fake.transport()``) or over real HTTP on 127.0.0.1
(``with NotionFake() as fake:`` / ``start()``/``stop()``; ``fake.url`` is the ``NOTION_API_URL`` a ``labbot serve``
subprocess is given). Every request is checked, in this order, and a failing one answered as Notion answers it:

* ``Authorization: Bearer <fake.token>``, else 401 ``unauthorized`` (not a violation: tests send wrong tokens);
* ``Notion-Version`` equal to the pinned version, the request against ``notion-openapi.json`` (method, path,
  parameters, body), ids that are UUIDs, ``page_size`` ≤ 100, at most 100 blocks in any ``children`` array, two
  levels of nesting and 1,000 blocks in one request, block types Notion creates (children only where a block
  takes them, code languages from Notion's list, table rows as wide as their table), rich text of at most 100
  objects with at most 2,000 characters each, properties that the parent has — else 400 ``validation_error``,
  and the reason appended to ``fake.violations``, which tests assert stays empty.

Then ``fail_next(status, headers=..., body=...)`` answers instead (a str body is sent as a non-JSON page), and
``hang_next()`` holds a request until ``release()`` (or ``stop()``) so that clients time out. Seed with
``add_page`` / ``add_data_source``; read with ``created_pages()``, ``page``, ``tree`` (blocks with ``children``
attached), ``page_markdown``, ``comments`` and ``requests``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from fakes.openapi import OpenApiSpec, SpecViolation
from fakes.served import ServedFake
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOKEN = "ntn_labbot0test0notion0token0000000000000000"
VERSION = "2025-09-03"
BOT = {"object": "user", "id": "00000000-0000-4000-8000-000000000b07"}
CODES = {
    **{400: "validation_error", 401: "unauthorized", 403: "restricted_resource", 404: "object_not_found"},
    **{409: "conflict_error", 429: "rate_limited", 500: "internal_server_error", 503: "service_unavailable"},
}
TEXT_BLOCKS = {"paragraph", "heading_1", "heading_2", "heading_3", "quote", "callout", "toggle", "code"}
TEXT_BLOCKS |= {"bulleted_list_item", "numbered_list_item", "to_do"}
TAKES_CHILDREN = TEXT_BLOCKS - {"heading_1", "heading_2", "heading_3", "code"}
TAKES_CHILDREN |= {"table", "column_list", "column", "synced_block"}
CREATABLE = TEXT_BLOCKS | {"divider", "equation", "table", "table_row", "image", "video", "file", "pdf", "audio"}
CREATABLE |= {"bookmark", "embed", "column_list", "column", "table_of_contents", "breadcrumb", "synced_block"}
CREATABLE |= {"link_to_page"}
LANGUAGES = {"ascii art", "llvm ir", "notion formula", "plain text", "vb.net", "visual basic", "java/c/c++/c#"}
LANGUAGES |= set(
    """abap agda arduino assembly bash basic bnf c c# c++ clojure coffeescript coq css dart dhall diff docker ebnf
    elixir elm erlang f# flow fortran gherkin glsl go graphql groovy haskell hcl html idris java javascript json julia
    kotlin latex less lisp livescript lua makefile markdown markup matlab mathematica mermaid nix objective-c ocaml
    pascal perl php powershell prolog protobuf purescript python r racket reason ruby rust sass scala scheme scss
    shell smalltalk solidity sql swift toml typescript verilog vhdl webassembly xml yaml""".split()  # noqa: SIM905
)  # Notion's code languages
EMPTY = {"title": [], "rich_text": [], "multi_select": [], "people": [], "relation": [], "files": [], "checkbox": False}
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$|^mailto:\S+$")
_ANNOTATIONS: dict[str, Any] = {"bold": False, "italic": False, "strikethrough": False, "underline": False}
_ANNOTATIONS |= {"code": False, "color": "default"}


class Invalid(Exception):
    """A request Notion would answer 400 validation_error."""


class NotFound(Exception):
    """An id Notion does not know, or that is not shared with the integration."""


@dataclass(frozen=True)
class CreatedPage:
    """A page made through the API; ids as 32 hex digits, as Notion URLs and labbot.toml write them."""

    id: str
    parent_id: str
    title: str
    url: str
    in_trash: bool


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int


def _id(value: Any) -> str:
    hex32 = str(value).replace("-", "").lower()
    if not re.fullmatch(r"[0-9a-f]{32}", hex32):
        raise Invalid(f"path failed validation: {value!r} should be a valid uuid")
    return str(uuid.UUID(hex32))


def _error(status: int, message: str) -> dict[str, Any]:
    code = CODES.get(status, "internal_server_error")
    return {"object": "error", "status": status, "code": code, "message": message}


def _not_found(what: str, oid: str) -> NotFound:
    shared = "Make sure the relevant pages and databases are shared with your integration."
    return NotFound(f"Could not find {what} with ID: {oid}. {shared}")


def _kind(block: dict[str, Any]) -> str:
    keys = [k for k in block if k not in {"object", "type", "id", "has_children"}]
    if len(keys) != 1 or not isinstance(block[keys[0]], dict):
        raise Invalid(f"a block needs exactly one type object, got keys {sorted(block)}")
    if block.get("type") not in (None, keys[0]):
        raise Invalid(f"block type {block['type']!r} does not match its {keys[0]!r} object")
    return keys[0]


def _plain(rich: list[dict[str, Any]]) -> str:
    return "".join(r.get("plain_text", "") for r in rich)


def _rich(items: Any) -> list[dict[str, Any]]:
    """Rich text in Notion's answer form (annotations, plain_text and href filled in)."""
    out = []
    for r in items or []:
        kind = r.get("type") or next((k for k in ("text", "mention", "equation") if k in r), "text")
        r = {**r, "type": kind, "annotations": {**_ANNOTATIONS, **(r.get("annotations") or {})}}
        if kind == "text":
            link = r["text"].get("link")
            r |= {"text": {"content": r["text"]["content"], "link": link}, "plain_text": r["text"]["content"]}
            r["href"] = link["url"] if link else None
        elif kind == "equation":
            r |= {"plain_text": r["equation"]["expression"], "href": None}
        out.append({"plain_text": "", "href": None, **r})
    return out


def _limits(value: Any) -> None:
    """Limits anywhere in a body: ≤ 100 rich text objects in an array, ≤ 2,000 characters in a text object,
    links and external files with absolute URLs."""
    if isinstance(value, dict):
        text = value.get("text")
        if isinstance(text, dict) and isinstance(text.get("content"), str) and len(text["content"]) > 2000:
            raise Invalid(f"text.content.length should be ≤ 2000, instead was {len(text['content'])}")
        for key, member in value.items():
            if key in {"rich_text", "title", "caption"} and isinstance(member, list) and len(member) > 100:
                raise Invalid(f"{key}.length should be ≤ 100, instead was {len(member)}")
            if key in {"link", "external"} and isinstance(member, dict) and not _URL.match(str(member.get("url"))):
                raise Invalid(f"Invalid URL for {key}: {member.get('url')!r}")
            _limits(member)
    elif isinstance(value, list):
        for member in value:
            _limits(member)


def _check_blocks(blocks: Any, level: int = 0, parent: str = "", width: int | None = None) -> int:
    """Notion's rules for blocks in a request (under a ``parent`` block type, a table ``width`` wide); returns how
    many blocks, nested ones included."""
    if not isinstance(blocks, list) or len(blocks) > 100:
        got = len(blocks) if isinstance(blocks, list) else type(blocks).__name__
        raise Invalid(f"children should be an array of at most 100 blocks, got {got}")
    total = 0
    for block in blocks:
        kind = _kind(block)
        data = block[kind]
        if kind not in CREATABLE or (kind == "table_row") != (parent == "table"):
            raise Invalid(f"a {kind} block cannot be created here")
        if kind in TEXT_BLOCKS and not isinstance(data.get("rich_text"), list):
            raise Invalid(f"{kind}.rich_text should be defined, instead was `undefined`")
        if kind == "code" and data.get("language") not in LANGUAGES:
            raise Invalid(f"code.language should be one of Notion's languages, instead was {data.get('language')!r}")
        if kind == "table_row" and len(data.get("cells", [])) != width:
            raise Invalid("table_row.cells should have as many cells as the table's table_width")
        kids = data.get("children") or []
        if kind == "table" and not kids:
            raise Invalid("a table needs its table_row children when it is created")
        if kids and (kind not in TAKES_CHILDREN or level >= 2):
            raise Invalid(f"a {kind} block cannot take children here (at most two levels of nesting per request)")
        total += 1 + (_check_blocks(kids, level + 1, kind, data.get("table_width")) if kids else 0)
    if level == 0 and total > 1000:
        raise Invalid(f"at most 1000 blocks can be created in one request, got {total}")
    return total


def _rough(blocks: list[dict[str, Any]], indent: str = "") -> list[str]:
    lines = []
    for b in blocks:
        kind, data = b["type"], b[b["type"]]
        text = _plain(data.get("rich_text") or [])
        if kind.startswith("heading_"):
            text = "#" * int(kind[-1]) + " " + text
        elif kind in {"bulleted_list_item", "numbered_list_item", "to_do"}:
            text = "- " + text
        elif kind == "code":
            text = f"```{data.get('language', '')}\n{text}\n```"
        elif kind == "table_row":
            text = "| " + " | ".join(_plain(cell) for cell in data["cells"]) + " |"
        if text:
            lines.append(indent + text)
        lines += _rough(b.get("children", []), indent + "  ")
    return lines


@dataclass
class _Failure:
    status: int
    headers: dict[str, str]
    body: Any
    on: str | None  # "METHOD /v1/template" or "METHOD /v1/path", or None: any request


class NotionFake(ServedFake):
    """Notion's API in memory; see the module docstring."""

    def __init__(self, token: str = TOKEN, *, version: str = VERSION, max_hang_s: float = 30.0) -> None:
        self.token, self.version, self.max_hang_s = token, version, max_hang_s
        self.spec = OpenApiSpec.load("notion-openapi.json")
        self.pages: dict[str, dict[str, Any]] = {}
        self.blocks: dict[str, dict[str, Any]] = {}
        self.children: dict[str, list[str]] = {}  # page or block id → its child block ids, in order
        self.data_sources: dict[str, dict[str, Any]] = {}
        self.comments: list[dict[str, Any]] = []
        self._created: list[str] = []  # ids of the pages made through the API, in order
        self.requests: list[SeenRequest] = []
        self.violations: list[str] = []
        self._failures: deque[_Failure] = deque()
        self._hangs = 0
        self._release = threading.Event()
        self._lock = threading.RLock()
        self._clock = itertools.count(1)
        self._routes: dict[tuple[str, str], Any] = {
            ("post", "/v1/search"): self._search,
            ("get", "/v1/pages/{page_id}"): lambda p, q, b: self._page(p["page_id"]),
            ("patch", "/v1/pages/{page_id}"): self._update_page,
            ("post", "/v1/pages"): self._create_page,
            ("get", "/v1/blocks/{block_id}/children"): self._list_children,
            ("patch", "/v1/blocks/{block_id}/children"): self._append_children,
            ("post", "/v1/comments"): self._comment,
            ("get", "/v1/data_sources/{data_source_id}"): lambda p, q, b: self._source(p["data_source_id"]),
            ("post", "/v1/data_sources/{data_source_id}/query"): self._query,
        }
        route = Route("/{path:path}", self._handle, methods=["GET", "POST", "PATCH", "DELETE"])
        self.app = Starlette(routes=[route])
        self.serve_app(self.app, "Notion fake")

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

    def fail_next(
        self,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        on: str | None = None,
    ) -> None:
        """Answer the next ``times`` valid requests with ``status`` — only those to ``on`` when it is given, a method
        and a template (``"PATCH /v1/blocks/{block_id}/children"``) or a path (``"GET /v1/blocks/<id>/children"``).
        The default body is Notion's error for the status; a str body is sent as HTML, as a proxy's page would be."""
        with self._lock:
            self._failures.extend(_Failure(status, dict(headers or {}), body, on) for _ in range(times))

    def hang_next(self, times: int = 1) -> None:
        """Hold the next ``times`` requests until :meth:`release` (or ``stop``, or ``max_hang_s``)."""
        self._hangs += times
        self._release.clear()

    def release(self) -> None:
        self._hangs = 0
        self._release.set()

    def transport(self) -> httpx.ASGITransport:
        """The in-process seam: ``NotionApi(transport=fake.transport())``."""
        return httpx.ASGITransport(app=self.app)

    # ----------------------------------------------------------------- HTTP

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        if self._hangs > 0:
            self._hangs -= 1
            for _ in range(int(self.max_hang_s * 100)):  # polled: the client's timeout is what is under test
                if self._release.is_set():
                    break
                await asyncio.sleep(0.01)
        query = dict(request.query_params)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        with self._lock:
            status, answer, headers = self._answer(request.method, request.url.path, query, request.headers, body)
            self.requests.append(SeenRequest(request.method, request.url.path, query, body, status))
        if isinstance(answer, str | bytes):
            return Response(answer, status, headers, media_type="text/html")
        return JSONResponse(answer, status, headers)

    def _answer(self, method: str, path: str, query: dict[str, str], headers: Any, body: Any) -> tuple[int, Any, Any]:
        if headers.get("authorization") != f"Bearer {self.token}":
            return 401, _error(401, "API token is invalid."), {}
        try:
            if headers.get("notion-version") != self.version:
                raise Invalid(f"Notion-Version should be {self.version}, got {headers.get('notion-version')!r}")
            if isinstance(body, str):
                raise Invalid("Error parsing JSON body.")
            op = self.spec.check(method, path, query=query, headers=dict(headers), body=body)
            route = self._routes.get((op.method, op.template))
            if route is None:
                raise Invalid(f"the Notion fake does not implement {method} {op.template}")
            _limits(body)
            where = (f"{method.upper()} {op.template}", f"{method.upper()} {path}")
            failure = next((f for f in self._failures if f.on is None or f.on in where), None)
            if failure is not None:
                self._failures.remove(failure)
                answer = failure.body if failure.body is not None else _error(failure.status, "injected failure")
                return failure.status, answer, failure.headers
            return 200, route(op.path_params, query, body or {}), {}
        except (Invalid, SpecViolation) as e:
            self.violations.append(f"{method} {path}: {e}")
            return 400, _error(400, str(e)), {}
        except NotFound as e:
            return 404, _error(404, str(e)), {}

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

    # ----------------------------------------------------------------- endpoints

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

    # ----------------------------------------------------------------- serving

    def _before_stop(self) -> None:
        self.release()
