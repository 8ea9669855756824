"""Block Kit's size limits as code, and the splitter that keeps long text inside them.

Anything labbot posts that can grow without bound (logs, an agent's answer, a list of runs) goes through
``text_blocks``: it cuts the text into section blocks of at most 3,000 characters, at line boundaries where it can
(else at a space, else anywhere), and groups them into messages of at most 50 blocks and 40,000 characters. A cut
inside a ``` code fence closes the fence at the end of one section and reopens it at the start of the next, so each
section renders on its own. Nothing else is added or dropped: the sections' bodies joined give back the input.
Callers that would need more than a few messages upload a file instead (``fits_in_messages``).

The text is mrkdwn and is passed through as is: escape user-supplied text (``run_card.escape``) before splitting.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, NamedTuple

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_MESSAGE_TEXT = 40_000

FENCE = "```"
FENCE_OPEN = FENCE + "\n"  # added at the start of a section that begins inside a code fence
FENCE_CLOSE = "\n" + FENCE  # added at the end of a section that ends inside one


class Section(NamedTuple):
    """One section's text: ``body`` is a slice of the input; ``prefix``/``suffix`` are fence markers or empty."""

    prefix: str
    body: str
    suffix: str

    @property
    def text(self) -> str:
        return self.prefix + self.body + self.suffix


def section_block(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def fence_ends(text: str) -> list[int]:
    """End offsets of the ``` tokens in ``text``, scanned left to right without overlap (as ``str.count`` does)."""
    ends, i = [], text.find(FENCE)
    while i != -1:
        ends.append(i + 3)
        i = text.find(FENCE, i + 3)
    return ends


def inside_fence(ends: list[int], offset: int) -> bool:
    """Whether ``offset`` (never inside a token) lies inside a code fence: an odd number of tokens before it."""
    return bisect_right(ends, offset) % 2 == 1


def _cuttable(text: str, cut: int) -> int:
    """``cut`` moved left, if needed, so it does not split a run of backticks except at a multiple of three from the
    run's start; fence tokens then stay whole and each side counts its own."""
    if not (text[cut - 1] == "`" and text[cut] == "`"):
        return cut
    start = cut - 1
    while start > 0 and text[start - 1] == "`":
        start -= 1
    return start + 3 * ((cut - start) // 3)


def _choose_cut(text: str, pos: int, hi: int, ends: list[int]) -> int:
    """Where the section starting at ``pos`` ends, at most at ``hi``: late line boundaries (outside a fence first),
    then late spaces, then any line boundary, then a hard cut."""
    half = pos + (hi - pos) // 2
    newline_cuts = []
    i = text.rfind("\n", pos, hi)
    while i != -1 and i + 1 > half:
        newline_cuts.append(i + 1)
        i = text.rfind("\n", pos, i)
    for cut in newline_cuts:
        if not inside_fence(ends, cut):
            return cut
    if newline_cuts:
        return newline_cuts[0]
    space = max(text.rfind(" ", pos, hi), text.rfind("\t", pos, hi))
    if space + 1 > half:
        return space + 1
    if i != -1 and i + 1 > pos:
        return i + 1
    cut = _cuttable(text, hi)
    if cut <= pos:  # the whole window is one run of backticks that starts before pos: pos is a multiple of 3 in
        cut = pos + 3 * ((hi - pos) // 3)  # it (pos was itself a cut), so step on in threes
    return cut


def split_sections(text: str, *, code: bool = False, limit: int = MAX_SECTION_TEXT) -> list[Section]:
    """``text`` cut into sections of at most ``limit`` characters each, fence markers included.

    ``code=True`` wraps every section in a fence (for logs); the text itself is then not searched for fences.
    """
    if limit < 16:
        raise ValueError(f"limit must be at least 16 characters, got {limit}")
    ends = [] if code else fence_ends(text)
    sections: list[Section] = []
    pos, n = 0, len(text)
    while pos < n:
        opened = code or inside_fence(ends, pos)
        prefix = FENCE_OPEN if opened else ""
        room = limit - len(prefix) - (len(FENCE_CLOSE) if code else 0)
        # the last section needs no room for a closing marker (an unclosed fence in the input stays unclosed)
        hi = pos + room - (0 if code else len(FENCE_CLOSE))
        cut = n if n - pos <= room else _choose_cut(text, pos, hi, ends)
        suffix = FENCE_CLOSE if code or (cut < n and inside_fence(ends, cut)) else ""
        sections.append(Section(prefix, text[pos:cut], suffix))
        pos = cut
    return sections


def text_blocks(text: str, *, code: bool = False) -> list[list[dict[str, Any]]]:
    """``text`` as messages (lists of section blocks) within Block Kit's limits; no messages for empty text."""
    messages: list[list[dict[str, Any]]] = []
    size = 0
    for section in split_sections(text, code=code):
        t = section.text
        if not messages or len(messages[-1]) >= MAX_BLOCKS or size + len(t) > MAX_MESSAGE_TEXT:
            messages.append([])
            size = 0
        messages[-1].append(section_block(t))
        size += len(t)
    return messages


def fits_in_messages(text: str, max_messages: int = 3, *, code: bool = False) -> bool:
    """Whether ``text`` posts as at most ``max_messages`` messages; if not, upload it as a file instead."""
    if len(text) > max_messages * MAX_MESSAGE_TEXT:
        return False  # cannot fit, and splitting a huge log only to count would be wasted work
    return len(text_blocks(text, code=code)) <= max_messages
