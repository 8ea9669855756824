"""Markdown → Notion blocks (request form), for ``create_page`` and ``append_blocks``: what a model writes.

:func:`markdown_to_blocks` reads headings, paragraphs, bulleted and numbered lists (nested by indentation), ``- [ ]``
/ ``- [x]`` to-dos, fenced code (its language mapped to Notion's names, unknown → ``plain text``), ``>`` quotes,
``---`` dividers, pipe tables (a ``table`` block with ``table_row`` children and a column header), ``$$…$$``
equations and ``![alt](url)`` images; inline.py reads the text inside them (**bold**, *italic*, ``code``, ~~strike~~,
[links](url)), split across text objects of at most 2,000 characters, and a block over 100 of them across blocks.

Blocks leave out ``type``: Notion reads it from the one type key, and the published document's ``children`` schema
lists only ``paragraph`` and ``bulleted_list_item`` as typed shapes. Children sit inside the type object, as
Notion's append and create requests take them; blocks.py splits them into requests within Notion's limits.
"""

from __future__ import annotations

import re
from typing import Any

from labbot.mcp_servers.notion.inline import MAX_RICH_TEXT, markdown_to_rich_text, text_objects

__all__ = ["LANGUAGES", "markdown_to_blocks"]
_LANGUAGE_NAMES = """abap agda arduino assembly bash basic bnf c c# c++ clojure coffeescript coq css dart dhall diff
docker ebnf elixir elm erlang f# flow fortran gherkin glsl go graphql groovy haskell hcl html idris java javascript
json julia kotlin latex less lisp livescript lua makefile markdown markup matlab mathematica mermaid nix objective-c
ocaml pascal perl php powershell prolog protobuf purescript python r racket reason ruby rust sass scala scheme scss
shell smalltalk solidity sql swift toml typescript verilog vhdl webassembly xml yaml"""
LANGUAGES = frozenset(_LANGUAGE_NAMES.split()) | {
    "ascii art", "llvm ir", "notion formula", "plain text", "vb.net", "visual basic", "java/c/c++/c#",
}  # fmt: skip  # Notion's code block languages
_ALIASES = {
    "py": "python", "python3": "python", "js": "javascript", "jsx": "javascript", "ts": "typescript",
    "tsx": "typescript", "sh": "shell", "zsh": "shell", "console": "shell", "shell-session": "shell",
    "yml": "yaml", "rs": "rust", "cpp": "c++", "cc": "c++", "cxx": "c++", "h": "c", "hpp": "c++", "cs": "c#",
    "csharp": "c#", "fsharp": "f#", "dockerfile": "docker", "md": "markdown", "txt": "plain text",
    "text": "plain text", "plaintext": "plain text", "jsonc": "json", "json5": "json", "golang": "go",
    "kt": "kotlin", "rb": "ruby", "tex": "latex", "ps1": "powershell", "pwsh": "powershell", "proto": "protobuf",
    "objc": "objective-c", "hs": "haskell", "ml": "ocaml", "tf": "hcl", "terraform": "hcl", "make": "makefile",
    "htm": "html", "svg": "xml", "vb": "visual basic", "wasm": "webassembly", "ll": "llvm ir", "pl": "perl",
    "jl": "julia", "ex": "elixir", "exs": "elixir", "erl": "erlang", "clj": "clojure", "sol": "solidity",
}  # fmt: skip


_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`]*?)\s*$")
_HEADING = re.compile(r"^\s*(#{1,6})\s+(.*?)\s*$")
_DIVIDER = re.compile(r"^\s*([-*_])(?:\s*\1){2,}\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])(?:\s+(.*))?$")
_TODO = re.compile(r"^\[([ xX])\](?:\s+(.*))?$", re.S)
_QUOTE = re.compile(r"^\s*>\s?(.*)$")
_ROW = re.compile(r"^\s*\|.*\|\s*$")
_RULE = re.compile(r"^\s*\|?(\s*:?-+:?\s*\|)+\s*(:?-+:?\s*)?\|?\s*$")
_EQUATION = re.compile(r"^\s*\$\$(.+?)\$\$\s*$")
_IMAGE = re.compile(r"^\s*!\[((?:\\.|[^\]\\])*)\]\(\s*(https?://\S+?)\s*\)\s*$")  # Notion takes URLs only


def _blocks(kind: str, rich: list[Any], children: list[Any] | None = None, **extra: Any) -> list[Any]:
    """One block of ``kind`` (more when the text needs over 100 text objects; children go to the last)."""
    parts = [rich[i : i + MAX_RICH_TEXT] for i in range(0, len(rich), MAX_RICH_TEXT)] or [[]]
    out: list[Any] = [{kind: {"rich_text": part, **extra}} for part in parts]
    if children:
        out[-1][kind]["children"] = children
    return out


def _language(info: str) -> str:
    """Notion's name for a fence's language (``py`` → ``python``), the whole info string or its first word."""
    for tag in (info.strip().lower(), info.strip().lower().split(" ", 1)[0]):
        tag = _ALIASES.get(tag.removeprefix("language-"), tag.removeprefix("language-"))
        if tag in LANGUAGES:
            return tag
    return "plain text"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedent(lines: list[str]) -> list[str]:
    cut = min((_indent(x) for x in lines if x.strip()), default=0)
    return [x[cut:] for x in lines]


def _starts_block(line: str) -> bool:
    return bool(
        _FENCE.match(line) or _HEADING.match(line) or _DIVIDER.match(line) or _ITEM.match(line)
        or _QUOTE.match(line) or _ROW.match(line) or _EQUATION.match(line) or line.strip() == "$$"
        or _IMAGE.match(line)
    )  # fmt: skip


def _cells(line: str) -> list[str]:
    inner = line.strip().removeprefix("|")
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def _table(rows: list[str]) -> dict[str, Any]:
    header, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]
    width = len(header)
    children = [
        {"table_row": {"cells": [markdown_to_rich_text(c) for c in (row + [""] * width)[:width]]}}
        for row in [header, *body]
    ]
    return {"table": {"table_width": width, "has_column_header": True, "has_row_header": False, "children": children}}


def _item(lines: list[str], i: int) -> tuple[list[Any], int]:
    """The list item at ``lines[i]``, its continuation lines and its indented children: (blocks, next index)."""
    m = _ITEM.match(lines[i])
    assert m is not None
    indent, marker, text = _indent(lines[i]), m.group(2), [m.group(3) or ""]
    j = i + 1
    while j < len(lines) and lines[j].strip() and not _starts_block(lines[j]):
        text.append(lines[j].strip())
        j += 1
    nested: list[str] = []
    while j < len(lines):
        if not lines[j].strip():
            k = j
            while k < len(lines) and not lines[k].strip():
                k += 1
            if k == len(lines) or _indent(lines[k]) <= indent:
                break
            nested.extend(lines[j:k])
            j = k
        elif _indent(lines[j]) > indent:
            nested.append(lines[j])
            j += 1
        else:
            break
    children = _parse(_dedent(nested))
    content = "\n".join(text)
    if marker[0].isdigit():
        return _blocks("numbered_list_item", markdown_to_rich_text(content), children), j
    todo = _TODO.match(content)
    if todo:
        rich = markdown_to_rich_text(todo.group(2) or "")
        return _blocks("to_do", rich, children, checked=todo.group(1) != " "), j
    return _blocks("bulleted_list_item", markdown_to_rich_text(content), children), j


def _parse(lines: list[str]) -> list[Any]:
    blocks: list[Any] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if fence := _FENCE.match(line):
            j, cut, mark = i + 1, len(fence.group(1)), fence.group(2)
            while j < len(lines) and not lines[j].strip().startswith(mark):
                j += 1
            code = "\n".join(x[min(cut, _indent(x)) :] for x in lines[i + 1 : j])
            blocks += _blocks("code", text_objects(code), language=_language(fence.group(3)))
            i = j + 1
        elif heading := _HEADING.match(line):
            level = min(len(heading.group(1)), 3)
            blocks += _blocks(f"heading_{level}", markdown_to_rich_text(heading.group(2)))
            i += 1
        elif _DIVIDER.match(line):
            blocks.append({"divider": {}})
            i += 1
        elif _ITEM.match(line):
            item, i = _item(lines, i)
            blocks += item
        elif _QUOTE.match(line):
            quoted = []
            while i < len(lines) and (q := _QUOTE.match(lines[i])):
                quoted.append(q.group(1))
                i += 1
            blocks += _blocks("quote", markdown_to_rich_text("\n".join(quoted)))
        elif _ROW.match(line) and i + 1 < len(lines) and _RULE.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and _ROW.match(lines[j]):
                j += 1
            blocks.append(_table(lines[i:j]))
            i = j
        elif (eq := _EQUATION.match(line)) or line.strip() == "$$":
            j = i if eq else next((k for k in range(i + 1, len(lines)) if lines[k].strip() == "$$"), len(lines))
            expression = eq.group(1) if eq else "\n".join(x.strip() for x in lines[i + 1 : j])
            blocks.append({"equation": {"expression": expression.strip()}})
            i = j + 1
        elif image := _IMAGE.match(line):
            caption = markdown_to_rich_text(image.group(1))
            blocks.append({"image": {"type": "external", "external": {"url": image.group(2)}, "caption": caption}})
            i += 1
        else:
            para = [line.strip()]
            i += 1
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i]):
                para.append(lines[i].strip())
                i += 1
            blocks += _blocks("paragraph", markdown_to_rich_text("\n".join(para)))
    return blocks


def markdown_to_blocks(markdown: str) -> list[Any]:
    """Markdown as Notion blocks in request form; see the module docstring."""
    return _parse(markdown.expandtabs(4).replace("\r\n", "\n").split("\n"))
