"""Notion blocks → Markdown, for ``get_page``: what a model reads of a page.

:func:`blocks_to_markdown` takes a list of block objects whose children are attached — under ``"children"`` (as
blocks.py's tree walker attaches them) or inside the type object (as a request body carries them, so
``blocks_to_markdown(markdown_to_blocks(md))`` works without a server). Every block type Notion documents has a
rendering; a type it does not know becomes a short marker, so nothing fails on a new block type. Text that would
read as Markdown syntax is escaped, so compose.py reads the result back to the same blocks.
"""

from __future__ import annotations

import re
from typing import Any

from labbot.mcp_servers.notion.inline import escape, plain_text, rich_text_to_markdown

__all__ = ["blocks_to_markdown"]

NUMBERED = "numbered_list_item"
LIST_TYPES = {"bulleted_list_item", NUMBERED, "to_do"}
_LINE_START = re.compile(r"^(\s*)(#{1,6}(?=\s|$)|>|[-+](?=\s|$)|\||---|___|\$\$)")
_NUMBERED_START = re.compile(r"^(\s*\d{1,9})([.)])(?=\s|$)")
_MEDIA = {"image", "file", "pdf", "video", "audio"}
_THEMATIC_BREAK = re.compile(r"^\s*([-*_])(?:\s*\1){2,}\s*$")  # "- --" is a divider, not an item saying "--"
_UNDERLINE = re.compile(r"[-=_:|][-=_:|\s]*$")  # setext underlines, table delimiter rows, "-- -"
_UNDERLINE_START = frozenset("-=_:|")


def _line_safe(text: str) -> str:
    """Inline Markdown whose lines cannot be read as block syntax (a paragraph starting with ``# ``, a line of
    ``--`` under one, which CommonMark reads as a heading); leading whitespace goes (it would read as code)."""
    lines = []
    for line in text.split("\n"):
        line = _NUMBERED_START.sub(r"\1\\\2", _LINE_START.sub(r"\1\\\2", line.lstrip(" \t")))
        lines.append("\\" + line if line[:1] in _UNDERLINE_START and _UNDERLINE.match(line) else line)
    return "\n".join(lines)


def _children(block: dict[str, Any]) -> list[dict[str, Any]]:
    kids = block.get("children")
    if kids is None:
        kids = (block.get(_type(block)) or {}).get("children")
    return [k for k in kids or [] if isinstance(k, dict)]


def _type(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if isinstance(kind, str):
        return kind
    return next((k for k in block if k not in {"object", "id", "children", "has_children"}), "unsupported")


def _indent(lines: list[str], prefix: str) -> list[str]:
    return [prefix + line if line else line for line in lines]


def _link(data: dict[str, Any]) -> tuple[str, str]:
    """(url, caption) of a file/media/bookmark object ("" when it has no caption or name)."""
    url = data.get("url") or (data.get("external") or {}).get("url") or (data.get("file") or {}).get("url") or ""
    return str(url), str(plain_text(data.get("caption")) or data.get("name") or "")


def _table(block: dict[str, Any], data: dict[str, Any]) -> list[str]:
    rows = [r for r in _children(block) if _type(r) == "table_row"]
    raw = [(r.get("table_row") or {}).get("cells") or [] for r in rows]
    width = int(data.get("table_width") or max((len(c) for c in raw), default=1))
    cells = []
    for row_cells in raw:
        row = [rich_text_to_markdown(c).replace("|", "\\|").replace("\n", " ") for c in row_cells]
        cells.append((row + [""] * width)[:width])
    if not data.get("has_column_header") or not cells:
        cells.insert(0, [""] * width)
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * width]
    return lines + ["| " + " | ".join(row) + " |" for row in cells[1:]]


def _block(block: dict[str, Any], number: int) -> list[str]:
    """The lines of one block and its children."""
    kind = _type(block)
    found = block.get(kind)
    data: dict[str, Any] = found if isinstance(found, dict) else {}
    text = _line_safe(rich_text_to_markdown(data.get("rich_text")))
    kids = _children(block)
    if kind in LIST_TYPES:
        marker = {"bulleted_list_item": "- ", "numbered_list_item": f"{number}. "}.get(kind)
        if marker is None:
            marker = "- [x] " if data.get("checked") else "- [ ] "
        pad = " " * (2 if kind == "to_do" else len(marker))  # children line up with the text ("10. " is four)
        if _THEMATIC_BREAK.match(marker + text.split("\n", 1)[0]):
            text = "\\" + text
        head = [(marker + text.replace("\n", "\n" + pad)) if text else marker.rstrip()]
        body = _render(kids)
        # a blank line keeps a paragraph apart from the item's text; an item without text starts on the next line
        gap = [""] if kids and text and _type(kids[0]) not in LIST_TYPES else []
        return head + gap + _indent(body, pad)
    if kind in {"heading_1", "heading_2", "heading_3"}:
        text = text.replace("\n", " ").rstrip()
        bare = text.rstrip("#")
        if bare != text and (not bare or bare[-1] in " \t"):  # "# a #" would be a heading "a": its #s close it
            text = bare + "\\" + text[len(bare) :]
        return ["#" * int(kind[-1]) + " " + text, *_after(kids)]
    if kind == "paragraph":
        return [text, *_after(kids, "  ")] if text or kids else []
    if kind in {"quote", "callout"}:
        icon = (data.get("icon") or {}).get("emoji") if kind == "callout" else None
        lines = ((f"{icon} " if icon else "") + text).split("\n") + _after(kids)
        return [f"> {line}" if line else ">" for line in lines]
    if kind == "toggle":
        return [f"<details><summary>{text}</summary>", "", *_render(kids), "", "</details>"]
    if kind == "code":
        lang = str(data.get("language") or "")
        code = plain_text(data.get("rich_text"))
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", code)), default=0))
        return [fence + ("" if lang == "plain text" else lang), *code.split("\n"), fence]
    if kind == "divider":
        return ["---"]
    if kind == "equation":
        expression = str(data.get("expression", ""))
        return ["$$", *expression.split("\n"), "$$"] if "\n" in expression else [f"$${expression}$$"]
    if kind == "table":
        return _table(block, data)
    if kind in _MEDIA or kind in {"bookmark", "embed", "link_preview"}:
        url, caption = _link(data)
        if kind == "image":
            return [f"![{escape(caption)}]({url})"]
        label = (f"{kind}: {caption}" if caption else kind) if kind in _MEDIA else caption or url
        return [f"[{escape(label)}]({url})"]
    if kind == "child_page":
        return [f"📄 {escape(str(data.get('title') or 'Untitled'))} (page {block.get('id', '')})"]
    if kind == "child_database":
        return [f"🗃 {escape(str(data.get('title') or 'Untitled'))} (database {block.get('id', '')})"]
    if kind == "link_to_page":
        target = data.get(str(data.get("type"))) or next((v for k, v in data.items() if k.endswith("_id")), "")
        return [f"→ {str(data.get('type', 'page_id')).removesuffix('_id').replace('_', ' ')} {target}"]
    if kind in {"column_list", "column", "synced_block"}:
        return _render(kids)
    if kind == "table_of_contents":
        return ["[table of contents]"]
    if kind == "breadcrumb":
        return []
    return [f"[{kind.replace('_', ' ')} block: not shown]", *_after(kids)]


def _after(kids: list[dict[str, Any]], prefix: str = "") -> list[str]:
    return ["", *_indent(_render(kids), prefix)] if kids else []


def _one_list(previous: str, kind: str) -> bool:
    """Whether two neighbouring blocks are items of one Markdown list (bullets and to-dos mix; numbers do not)."""
    if previous not in LIST_TYPES or kind not in LIST_TYPES:
        return False
    return kind == previous or NUMBERED not in (kind, previous)


def _render(blocks: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    previous = ""
    number = 0
    for block in blocks:
        kind = _type(block)
        number = number + 1 if kind == "numbered_list_item" else 0
        rendered = _block(block, number)
        if not rendered:
            continue
        if lines and not _one_list(previous, kind):  # items of one list are tight; everything else is apart
            lines.append("")
        lines.extend(line for chunk in rendered for line in chunk.split("\n"))  # text may hold line breaks
        previous = kind
    return lines


def blocks_to_markdown(blocks: list[dict[str, Any]]) -> str:
    """Markdown for ``blocks`` (children attached); see the module docstring."""
    return "\n".join(_render(blocks)).strip("\n")
