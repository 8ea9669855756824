"""Splitting slash-command text into words like a shell, tolerant of what Slack sends (pure functions).

Slack delivers ``/lab`` text with its own formatting: links and mentions wrapped as ``<http://x|x>`` / ``<@U1|ann>``,
``&``/``<``/``>`` escaped as entities, and whatever the user's keyboard auto-corrected: typographic quotes “ ” ‘ ’,
apostrophes inside words (``don’t``), an em dash for ``--`` (``—gpus``), non-breaking or zero-width spaces.
``tokenize`` undoes all of that, then splits with ``shlex`` (POSIX rules). Inside ASCII single quotes nothing is
rewritten, so ``quote`` (what ``render`` uses) gives text that ``tokenize`` reads back exactly.
"""

from __future__ import annotations

import re
import shlex

_LINK = re.compile(r"<([^<>|]*)\|([^<>]*)>|<([^<>]*)>")
_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}
_DOUBLE = '"“”„‟'  # any of these opens a double-quoted string, and any of the first three closes one
_SINGLE_TYPOGRAPHIC = "‘’‚‛"
_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
_DASHES = "—–"


class TokenError(ValueError):
    """The text cannot be split into words; ``message`` says why and what would be right."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def unwrap_slack(text: str) -> str:
    """``<http://x|label>`` → ``label``, ``<http://x>`` → ``http://x``, then ``&lt;``/``&gt;``/``&amp;`` decoded."""
    text = _LINK.sub(lambda m: m.group(2) if m.group(3) is None else m.group(3), text)
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def escape_slack(text: str) -> str:
    """The inverse of the entity decoding in :func:`unwrap_slack` (what Slack itself does to typed text)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def normalise_quotes(text: str) -> str:
    """Typographic quotes that act as quotes become ASCII ones; unusual spaces, outside quotes, become plain ones.

    Outside quotes: “ ” „ open a double-quoted string, ‘ ’ a single-quoted one, except ’ between two letters or
    digits, which is an apostrophe and stays; an em or en dash starting a word before a letter becomes ``--``.
    Inside double quotes “ or ” closes as " does; inside a string opened by ‘ or ’, any single quote closes it;
    inside ASCII single quotes only ' closes, and nothing is rewritten (as in a shell).
    """
    out: list[str] = []
    closer = ""  # the characters that close the string we are in; "" outside quotes
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if closer:
            if c == "\\" and closer == _DOUBLE[:3] and i + 1 < n:
                out.append(text[i : i + 2])
                i += 2
                continue
            if c in closer:
                out.append('"' if closer == _DOUBLE[:3] else "'")
                closer = ""
            else:
                out.append(c)
        elif c == "\\" and i + 1 < n:
            out.append(text[i : i + 2])
            i += 1
        elif c in _DOUBLE:
            out.append('"')
            closer = _DOUBLE[:3]
        elif c == "'":
            out.append(c)
            closer = "'"
        elif c in _SINGLE_TYPOGRAPHIC:
            if c == "’" and 0 < i < n - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
                out.append(c)
            else:
                out.append("'")
                closer = "'‘’‚‛"
        elif c in _SPACES:
            out.append(" ")
        elif c in _INVISIBLE:
            pass
        elif c in _DASHES and (not out or out[-1][-1:].isspace()) and i + 1 < n and text[i + 1].isalpha():
            out.append("--")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def tokenize(text: str) -> list[str]:
    """The words of Slack's slash-command ``text``; TokenError for an unbalanced quote or a dangling backslash."""
    prepared = normalise_quotes(unwrap_slack(text))
    try:
        return shlex.split(prepared)
    except ValueError as e:
        if "quotation" in str(e):
            raise TokenError("unbalanced quote: close it, or remove it") from None
        raise TokenError("a backslash at the end has nothing to escape: remove it, or write \\\\") from None


def quote(word: str) -> str:
    """``word`` as text that :func:`tokenize` reads back as exactly ``word`` (shell-quoted, Slack-escaped)."""
    return escape_slack(shlex.quote(word))
