"""The Markdown reader of compose.py and inline.py: markdown-it-py's CommonMark with its GFM tables and
strikethrough, and two rules of our own where the Markdown Notion's pages read back as differs from CommonMark.

* ``$$…$$`` on one line, or ``$$`` lines around an expression, is a ``math_block`` token (Notion's equation block);
  it may interrupt a paragraph. An unclosed ``$$`` runs to the end of its container, as an unclosed fence does.
* ``_`` is text, never emphasis: render.py writes ``snake_case`` and ``__init__`` as they are, and what models
  write is ``*`` and ``**``. A rule before CommonMark's emphasis takes a run of underscores as text.

Raw HTML, entities and ``<url>`` autolinks are text too (render.py escapes neither ``<`` nor ``&``).
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline

__all__ = ["MARKDOWN"]


def _line(state: StateBlock, n: int) -> str:
    return state.src[state.bMarks[n] + state.tShift[n] : state.eMarks[n]].strip()


def _equation(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if state.sCount[start] - state.blkIndent >= 4:  # an indented code block
        return False
    first = _line(state, start)
    if first != "$$" and not (len(first) > 4 and first.startswith("$$") and first.endswith("$$")):
        return False
    if silent:
        return True
    if first == "$$":
        last = start + 1
        while last < end and _line(state, last) != "$$":
            if state.sCount[last] < state.blkIndent and not state.isEmpty(last):
                break  # a line left of its list item's content ends the item, and so the expression
            last += 1
        body = [_line(state, n) for n in range(start + 1, last)]
        state.line = last + 1 if last < end and _line(state, last) == "$$" else last
    else:
        body, state.line = [first[2:-2]], start + 1
    token = state.push("math_block", "math", 0)
    token.content, token.markup, token.map, token.block = "\n".join(body).strip(), "$$", [start, state.line], True
    return True


def _underscores(state: StateInline, silent: bool) -> bool:
    if state.src[state.pos] != "_":
        return False
    end = state.pos
    while end < state.posMax and state.src[end] == "_":
        end += 1
    if not silent:
        state.pending += state.src[state.pos : end]
    state.pos = end
    return True


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable(["entity", "autolink"])
    md.block.ruler.before("fence", "equation", _equation, {"alt": ["paragraph", "reference", "blockquote", "list"]})
    md.inline.ruler.before("emphasis", "underscores", _underscores)
    return md


MARKDOWN = _parser()
