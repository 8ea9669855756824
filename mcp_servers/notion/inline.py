"""Notion rich text ↔ inline Markdown, both directions in one place so each reads back what the other writes.

:func:`rich_text_to_markdown` (render.py uses it): bold ``**``, italic ``*``, strikethrough ``~~``, code spans,
links; mentions as their text (linked when Notion gives a URL); inline equations as ``$…$``; text that would read
as Markdown is backslash-escaped. :func:`markdown_to_rich_text` (compose.py uses it) reads the same syntax back,
with CommonMark's rules where they matter — escapes, code spans whose content is literal, closing markers that
follow non-space — into text objects of at most 2,000 characters (Notion's limit).
"""

from __future__ import annotations

import re
import string
from typing import Any

__all__ = ["MAX_RICH_TEXT", "MAX_TEXT", "escape", "markdown_to_rich_text", "plain_text", "rich_text_to_markdown"]

MAX_TEXT = 2000  # characters in one text object
MAX_RICH_TEXT = 100  # text objects in one rich_text array
_PUNCT = frozenset(string.punctuation)
_ESCAPE = re.compile(r"([\\*`\[\]])")
_CODE = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_URL = re.compile(r"\(\s*([^()\s]+(?:\([^()\s]*\)[^()\s]*)*)\s*\)")
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


def _step(text: str, j: int) -> tuple[int, bool]:
    """(the index after the atom at ``j`` — an escape, a code span, a run of backticks or one character, whether
    that atom is a literal ``*``)."""
    c = text[j]
    if c == "\\" and text[j + 1 : j + 2] in _PUNCT:
        return j + 2, False
    if c == "`":
        m = _CODE.match(text, j)
        if m:
            return m.end(), False
        return j + len(text[j:]) - len(text[j:].lstrip("`")), False
    return j + 1, c == "*"


def _closer(text: str, start: int, marker: str) -> int | None:
    """Where ``marker`` closes a span whose content starts at ``start``: after non-space, not inside a code span
    or an escape, and not part of a longer run of the marker's character."""
    if start >= len(text) or text[start].isspace():
        return None
    j, star_before = start, False
    while j < len(text):
        if j > start and text.startswith(marker, j) and not text[j - 1].isspace():
            after = text[j + len(marker) : j + len(marker) + 1]
            if after != marker[0] and not (marker == "*" and star_before):
                return j
        j, star_before = _step(text, j)
    return None


def _bracket(text: str, i: int) -> tuple[int, int, str] | None:
    """(where its text ends, where it ends, its url) of a link ``[text](url)`` opening at ``i``."""
    j = i + 1
    while j < len(text) and text[j] != "]":
        j = _step(text, j)[0]
    m = _URL.match(text, j + 1) if j < len(text) else None
    return (j, m.end(), m.group(1)) if m else None


def _span(text: str, i: int) -> tuple[str, str, int] | None:
    """(marker, annotation, where it closes) of a bold, strikethrough or italic span opening at ``i``."""
    for marker, key in (("**", "bold"), ("~~", "strikethrough"), ("*", "italic")):
        if not text.startswith(marker, i) or (marker == "*" and text[i + 1 : i + 2] == "*"):
            continue  # a lone * before another is not an opener
        shut = _closer(text, i + len(marker), marker)
        if shut is not None:
            return marker, key, shut
    return None


def _inline(text: str, look: dict[str, bool], href: str | None, out: list[Any]) -> None:
    buf: list[str] = []

    def emit(content: str, extra: dict[str, bool] | None = None, link: str | None = href) -> None:
        if buf:
            out.extend(text_objects("".join(buf), look, href))
            buf.clear()
        if content:
            out.extend(text_objects(content, {**look, **(extra or {})}, link))

    i = 0
    while i < len(text):
        c, nxt = text[i], text[i + 1 : i + 2]
        if c == "\\" and nxt in _PUNCT:
            buf.append(nxt)
            i += 2
            continue
        if c == "`" and (code := _CODE.match(text, i)):
            inner = code.group(2)
            emit(inner[1:-1] if inner[:1] == inner[-1:] == " " and inner.strip() else inner, {"code": True})
            i = code.end()
            continue
        if c == "[" and (link := _bracket(text, i)):
            emit("")
            close, end, url = link
            _inline(text[i + 1 : close], look, url if _ABSOLUTE.match(url) else href, out)  # Notion refuses "#x"
            i = end
            continue
        span = _span(text, i)
        if span:
            marker, key, shut = span
            emit("")
            _inline(text[i + len(marker) : shut], {**look, key: True}, href, out)
            i = shut + len(marker)
            continue
        step = _step(text, i)[0] if c == "`" else i + 1
        buf.append(text[i:step])
        i = step
    emit("")


def markdown_to_rich_text(text: str) -> list[Any]:
    """Inline Markdown as a Notion rich text array (request form); see the module docstring."""
    out: list[Any] = []
    _inline(text, {}, None, out)
    return out
