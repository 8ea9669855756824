"""Notion rich text ↔ inline Markdown, both directions in one place so each reads back what the other writes.

:func:`rich_text_to_markdown` (render.py uses it): bold ``**``, italic ``*``, strikethrough ``~~``, code spans,
links; mentions as their text (linked when Notion gives a URL); inline equations as ``$…$``; text that would read
as Markdown is backslash-escaped. :func:`markdown_to_rich_text` reads the same syntax back from markdown-it-py's
inline tokens (:class:`RichText`, which compose.py uses for the text of blocks) into text objects of at most 2,000
characters (Notion's limit); a link without a scheme (``#x``, ``page.md``) keeps its text and loses its target,
which Notion would refuse.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it.token import Token

from labbot.mcp_servers.notion.parser import MARKDOWN

__all__ = ["MAX_RICH_TEXT", "MAX_TEXT", "escape", "markdown_to_rich_text", "plain_text", "rich_text_to_markdown"]

MAX_TEXT = 2000  # characters in one text object
MAX_RICH_TEXT = 100  # text objects in one rich_text array
_ESCAPE = re.compile(r"([\\*`\[\]])")
_ABSOLUTE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # a link Notion keeps has a scheme


# ----------------------------------------------------------------- rich text → Markdown


def plain_text(rich: Any) -> str:
    """The plain text of a rich text array."""
    if not isinstance(rich, list):
        return ""
    return "".join(_content(r) for r in rich if isinstance(r, dict))


def _content(r: dict[str, Any]) -> str:
    if r.get("type", "text") == "text" and isinstance(r.get("text"), dict):
        return str(r["text"].get("content", ""))
    return str(r.get("plain_text") or "")


def escape(text: str) -> str:
    """``text`` with what would read as inline Markdown backslash-escaped."""
    return _ESCAPE.sub(r"\\\1", text).replace("~~", r"\~\~")


def _wrap(text: str, marker: str) -> str:
    """``marker`` around ``text``, its outer whitespace kept outside (``**a **`` would not read as bold)."""
    core = text.strip()
    if not core:
        return text
    lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
    if marker == "~~":  # a tilde next to ~~ would lengthen the marker ("~~~~~" is not a struck "~")
        core = ("\\" if core.startswith("~") else "") + core
        if core.endswith("~") and (len(core) - len(core[:-1].rstrip("\\"))) % 2:
            core = core[:-1] + "\\~"
    return f"{lead}{marker}{core}{marker}{trail}"


def _code_span(text: str) -> str:
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    edge = text.startswith("`") or text.endswith("`") or (text[:1] == text[-1:] == " " and text.strip() != "")
    pad = " " if edge else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _runs(rich: list[Any]) -> list[tuple[str, tuple[bool, bool, bool, bool], str | None, str]]:
    """(text, (bold, italic, strike, code), href, kind) per run; neighbours that look the same are merged (a long
    text split across objects reads as one span)."""
    runs: list[tuple[str, tuple[bool, bool, bool, bool], str | None, str]] = []
    for r in rich:
        if not isinstance(r, dict):
            continue
        a = r.get("annotations") or {}
        look = (bool(a.get("bold")), bool(a.get("italic")), bool(a.get("strikethrough")), bool(a.get("code")))
        kind = str(r.get("type") or "text")
        text = str((r.get("equation") or {}).get("expression", "")) if kind == "equation" else _content(r)
        link = (r.get("text") or {}).get("link") if kind == "text" else None
        href = link.get("url") if isinstance(link, dict) else r.get("href")
        if runs and kind == "text" and runs[-1][1:] == (look, href, kind):
            runs[-1] = (runs[-1][0] + text, look, href, kind)
        else:
            runs.append((text, look, href, kind))
    return runs


def rich_text_to_markdown(rich: Any) -> str:
    """A rich text array as inline Markdown; see the module docstring."""
    if not isinstance(rich, list):
        return ""
    out = []
    for text, (bold, italic, strike, code), href, kind in _runs(rich):
        if kind == "equation":
            out.append(f"${text}$")
            continue
        s = _code_span(text) if code else escape(text)
        for on, marker in ((italic, "*"), (bold, "**"), (strike, "~~")):
            if on:
                s = _wrap(s, marker)
        out.append(f"[{s}]({href})" if href and text.strip() else s)
    return "".join(out)


# ----------------------------------------------------------------- Markdown → rich text


def text_objects(content: str, annotations: dict[str, bool] | None = None, href: str | None = None) -> list[Any]:
    """``content`` as text objects (request form) of at most 2,000 characters each."""
    out: list[Any] = []
    for i in range(0, len(content), MAX_TEXT):
        text: dict[str, Any] = {"content": content[i : i + MAX_TEXT]}
        if href:
            text["link"] = {"url": href}
        out.append({"type": "text", "text": text, **({"annotations": dict(annotations)} if annotations else {})})
    return out


class RichText:
    """Rich text (request form) from markdown-it's inline tokens; neighbouring text of one look is one run."""

    def __init__(self) -> None:
        self.runs: list[tuple[list[str], frozenset[str], str | None]] = []

    def add(self, content: str, look: frozenset[str] = frozenset(), href: str | None = None) -> None:
        if not content:
            return
        if self.runs and self.runs[-1][1:] == (look, href):
            self.runs[-1][0].append(content)
        else:
            self.runs.append(([content], look, href))

    def walk(self, tokens: list[Token], look: frozenset[str] = frozenset(), href: str | None = None) -> RichText:
        looks, hrefs = [look], [href]
        for t in tokens:
            kind = t.type
            if kind in _MARKS:
                looks.append(looks[-1] | {_MARKS[kind]})
            elif kind in _CLOSERS or kind == "link_close":
                (hrefs if kind == "link_close" else looks).pop()
            elif kind == "link_open":
                hrefs.append(_absolute(t.attrGet("href")) or hrefs[-1])  # Notion refuses a link to "#x"
            elif kind == "code_inline":
                self.add(t.content, looks[-1] | {"code"}, hrefs[-1])
            elif kind in {"softbreak", "hardbreak"}:
                self.add("\n", looks[-1], hrefs[-1])
            elif kind == "image":  # inside text: its alt text, linked to the image (or to the link around it)
                src = hrefs[-1] or _absolute(t.attrGet("src"))
                if t.children:
                    self.walk(t.children, looks[-1], src)
                else:
                    self.add(str(t.attrGet("src") or ""), looks[-1], src)
            else:  # text, and what markdown-it leaves as text
                self.add(t.content, looks[-1], hrefs[-1])
        return self

    def objects(self) -> list[Any]:
        out: list[Any] = []
        for parts, look, href in self.runs:
            out += text_objects("".join(parts), {k: True for k in _ORDER if k in look}, href)
        return out


_MARKS = {"strong_open": "bold", "em_open": "italic", "s_open": "strikethrough"}
_CLOSERS = {"strong_close", "em_close", "s_close"}
_ORDER = ("bold", "italic", "strikethrough", "code")


def _absolute(url: Any) -> str | None:
    return url if isinstance(url, str) and _ABSOLUTE.match(url) else None


def markdown_to_rich_text(text: str) -> list[Any]:
    """Inline Markdown as a Notion rich text array (request form); see the module docstring."""
    [inline] = MARKDOWN.parseInline(text, {})
    return RichText().walk(inline.children or []).objects()
