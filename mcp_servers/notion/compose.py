"""Markdown → Notion blocks (request form), for ``create_page`` and ``append_blocks``: what a model writes.

:func:`markdown_to_blocks` reads markdown-it-py's token stream (CommonMark with GFM tables and strikethrough; the
parser is in parser.py): headings (``#`` and underlined; levels past 3 are ``heading_3``), paragraphs, bulleted and
numbered lists nested as CommonMark nests them, ``- [ ]`` / ``- [x]`` to-dos, fenced code (its language mapped to
Notion's names, unknown → ``plain text``) and indented code, ``>`` quotes (their leading paragraphs the quote's
text, the rest its children), dividers, tables (a ``table`` block with ``table_row`` children and a column
header), ``$$…$$`` equations and ``![alt](url)`` images on a line of their own; inline.py reads the text inside
them (**bold**, *italic*, ``code``, ~~strike~~, [links](url)) into text objects of at most 2,000 characters, and a
block over 100 of them is split across blocks.

Blocks leave out ``type``: Notion reads it from the one type key, and the published document's ``children`` schema
lists only ``paragraph`` and ``bulleted_list_item`` as typed shapes. Children sit inside the type object, as
Notion's append and create requests take them; blocks.py splits them into requests within Notion's limits.
"""

from __future__ import annotations

from typing import Any

from markdown_it.token import Token

from labbot.mcp_servers.notion.inline import MAX_RICH_TEXT, RichText, text_objects
from labbot.mcp_servers.notion.parser import MARKDOWN

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


class _Reader:
    """Blocks from markdown-it's token stream, which nests as ``*_open`` … ``*_close``."""

    def __init__(self, tokens: list[Token], env: dict[str, Any]) -> None:
        self.tokens, self.env, self.i = tokens, env, 0

    def take(self) -> Token:
        self.i += 1
        return self.tokens[self.i - 1]

    def blocks(self, until: str = "") -> list[Any]:
        """Blocks up to the token ``until`` (which is taken) or the end."""
        out: list[Any] = []
        while self.i < len(self.tokens):
            t = self.take()
            if t.type == until:
                break
            if t.type == "paragraph_open":
                out += self.paragraph(self.take())
                self.take()
            elif t.type == "heading_open":
                out += _blocks(f"heading_{min(int(t.tag[1:]), 3)}", self.rich(self.take()))
                self.take()
            elif t.type in {"bullet_list_open", "ordered_list_open"}:
                while self.tokens[self.i].type == "list_item_open":
                    out += self.item(self.take(), t.type == "ordered_list_open")
                self.take()
            elif t.type == "blockquote_open":
                out += self.quote(self.blocks("blockquote_close"))
            elif t.type in {"fence", "code_block"}:
                language = _language(t.info) if t.type == "fence" else "plain text"
                out += _blocks("code", text_objects(t.content.removesuffix("\n")), language=language)
            elif t.type == "hr":
                out.append({"divider": {}})
            elif t.type == "math_block":
                out.append({"equation": {"expression": t.content}})
            elif t.type == "table_open":
                out.append(self.table())
        return out

    def rich(self, inline: Token) -> list[Any]:
        return RichText().walk(inline.children or []).objects()

    def paragraph(self, inline: Token) -> list[Any]:
        """A paragraph; a line of it that is only an image (of an http(s) URL) is an image block."""
        out: list[Any] = []
        line: list[Token] = []
        text: list[Token] = []
        depth = 0
        for t in [*(inline.children or []), None]:
            if t is None or (t.type in {"softbreak", "hardbreak"} and depth == 0):
                image = [x for x in line if x.type != "text" or x.content.strip()]
                if len(image) == 1 and image[0].type == "image" and _web(image[0].attrGet("src")):
                    if text:
                        out += _blocks("paragraph", RichText().walk(text[:-1]).objects())  # less its line break
                    out.append(_image(image[0]))
                    text = []
                else:
                    text += line + ([t] if t else [])
                line = []
                continue
            depth += t.nesting
            line.append(t)
        if text:
            out += _blocks("paragraph", RichText().walk(text).objects())
        return out

    def item(self, opener: Token, numbered: bool) -> list[Any]:
        """A list item: the paragraph on its marker's line is its text, the blocks after it its children."""
        nxt = self.tokens[self.i]
        rich: list[Any] = []
        checked: bool | None = None
        if nxt.type == "paragraph_open" and nxt.map and opener.map and nxt.map[0] == opener.map[0]:
            self.take()
            inline = self.take()
            self.take()
            box = inline.content[:4]
            if not numbered and box[:3] in {"[ ]", "[x]", "[X]"} and box[3:].strip() == "":
                checked = box[1] != " "
                [inline] = MARKDOWN.parseInline(inline.content[3:].lstrip(), self.env)
            rich = self.rich(inline)
        children = self.blocks("list_item_close")
        if numbered:
            return _blocks("numbered_list_item", rich, children)
        if checked is not None:
            return _blocks("to_do", rich, children, checked=checked)
        return _blocks("bulleted_list_item", rich, children)

    def quote(self, inside: list[Any]) -> list[Any]:
        """A quote: its leading paragraphs are its text (apart by a blank line), what follows its children."""
        rich: list[Any] = []
        while inside and "paragraph" in inside[0]:
            rich += (text_objects("\n\n") if rich else []) + inside.pop(0)["paragraph"]["rich_text"]
        return _blocks("quote", rich, inside)

    def table(self) -> dict[str, Any]:
        rows: list[list[Any]] = []
        while (t := self.take()).type != "table_close":
            if t.type == "tr_open":
                rows.append([])
            elif t.type == "inline":
                rows[-1].append(self.rich(t))
        width = len(rows[0])
        children = [{"table_row": {"cells": (row + [[]] * width)[:width]}} for row in rows]
        return {
            "table": {"table_width": width, "has_column_header": True, "has_row_header": False, "children": children}
        }


def _web(url: Any) -> bool:
    return isinstance(url, str) and url.lower().startswith(("http://", "https://"))  # Notion takes URLs only


def _image(token: Token) -> dict[str, Any]:
    caption = RichText().walk(token.children or []).objects()
    return {"image": {"type": "external", "external": {"url": token.attrGet("src")}, "caption": caption}}


def markdown_to_blocks(markdown: str) -> list[Any]:
    """Markdown as Notion blocks in request form; see the module docstring."""
    env: dict[str, Any] = {}
    return _Reader(MARKDOWN.parse(markdown, env), env).blocks()
