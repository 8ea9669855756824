"""Page properties and list entries as compact text, for ``get_page``'s header, ``search`` and
``query_data_source``: one value per property type Notion documents (title, rich_text, number, select,
multi_select, status, date, checkbox, url, email, phone, people, relation, files, formula, rollup, unique_id,
timestamps, users), anything else as short JSON.
"""

from __future__ import annotations

import json
from typing import Any

from labbot.mcp_servers.notion.inline import plain_text

__all__ = ["entry_line", "page_header", "property_text", "title_of"]

MAX_VALUE_CHARS = 300  # of one property value in a list line


def _user(u: Any) -> str:
    if not isinstance(u, dict):
        return ""
    return str(u.get("name") or (u.get("person") or {}).get("email") or u.get("id") or "")


def _date(d: Any) -> str:
    if not isinstance(d, dict) or not d.get("start"):
        return ""
    return f"{d['start']} → {d['end']}" if d.get("end") else str(d["start"])


def _named(v: Any) -> str:
    return str(v.get("name") or "") if isinstance(v, dict) else ""


def _scalar(kind: str, v: Any) -> str:
    """A value of ``kind`` (also the inner value of a formula or rollup)."""
    if v is None:
        return ""
    if kind in {"title", "rich_text"}:
        return plain_text(v)
    if kind in {"select", "status"}:
        return _named(v)
    if kind == "multi_select":
        return ", ".join(_named(o) for o in v if _named(o))
    if kind == "date":
        return _date(v)
    if kind in {"checkbox", "boolean"}:
        return "yes" if v else "no"
    if kind in {"people"}:
        return ", ".join(_user(u) for u in v)
    if kind in {"created_by", "last_edited_by"}:
        return _user(v)
    if kind == "relation":
        return ", ".join(str(r.get("id")) for r in v if isinstance(r, dict))
    if kind == "files":
        return ", ".join(str(f.get("name") or "") for f in v if isinstance(f, dict))
    if kind == "unique_id" and isinstance(v, dict):
        prefix = v.get("prefix")
        return f"{prefix}-{v.get('number', '')}" if prefix else str(v.get("number", ""))
    if kind == "verification" and isinstance(v, dict):
        return str(v.get("state") or "")
    if isinstance(v, str | int | float):
        return str(v)
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def property_text(prop: Any) -> str:
    """A page property value (``{"type": "select", "select": {...}}``) as text."""
    if not isinstance(prop, dict):
        return ""
    kind = str(prop.get("type") or "")
    value = prop.get(kind)
    if kind in {"formula", "rollup"} and isinstance(value, dict):
        inner = str(value.get("type") or "")
        if inner == "array":
            return ", ".join(property_text(item) for item in value.get("array") or [])
        return _scalar(inner, value.get(inner))
    return _scalar(kind, value)


def title_of(obj: dict[str, Any]) -> str:
    """The title of a page (its title property) or a data source (its ``title``)."""
    if isinstance(obj.get("title"), list):
        return plain_text(obj["title"]) or "Untitled"
    for prop in (obj.get("properties") or {}).values():
        if isinstance(prop, dict) and prop.get("type") == "title":
            return plain_text(prop.get("title")) or "Untitled"
    return "Untitled"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def entry_line(obj: dict[str, Any], *, with_properties: bool = False) -> str:
    """One search result or data-source row: kind, id, title, (properties,) url, last edited."""
    kind = str(obj.get("object") or "page").replace("_", " ")
    bits = [f"{kind} {obj.get('id', '?')}", _short(title_of(obj))]
    if with_properties:
        for name, prop in (obj.get("properties") or {}).items():
            if isinstance(prop, dict) and prop.get("type") != "title":
                bits.append(f"{name}: {_short(property_text(prop)) or '—'}")
    if obj.get("url"):
        bits.append(str(obj["url"]))
    if obj.get("last_edited_time"):
        bits.append(f"edited {obj['last_edited_time']}")
    return " · ".join(bits)


def page_header(page: dict[str, Any]) -> str:
    """The page's title, where it is and its other properties, above its content."""
    lines = [f"# {' '.join(title_of(page).split())}", f"id: {page.get('id', '?')}"]
    if page.get("url"):
        lines.append(f"url: {page['url']}")
    parent = page.get("parent") or {}
    if isinstance(parent, dict) and parent.get("type"):
        where = str(parent["type"])
        target = parent.get(where) if where != "workspace" else ""
        lines.append(f"parent: {where.removesuffix('_id').replace('_', ' ')} {target}".rstrip())
    if page.get("last_edited_time"):
        lines.append(f"last edited: {page['last_edited_time']}")
    for name, prop in (page.get("properties") or {}).items():
        if isinstance(prop, dict) and prop.get("type") != "title":
            lines.append(f"{name}: {property_text(prop) or '—'}")
    if page.get("in_trash") or page.get("archived"):
        lines.append("(this page is in the trash)")
    return "\n".join(lines)
