"""Notion's content model as the fake checks and keeps it: the block types it creates (and which take children),
code languages, rich text in Notion's answer form, the limits on a request's content (`_check_blocks`, `_limits`),
and a page's blocks as rough Markdown for assertions (`_rough`)."""

from __future__ import annotations

import re
from typing import Any

from fakes.notion.errors import Invalid

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
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$|^mailto:\S+$")
_ANNOTATIONS: dict[str, Any] = {"bold": False, "italic": False, "strikethrough": False, "underline": False}
_ANNOTATIONS |= {"code": False, "color": "default"}


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
