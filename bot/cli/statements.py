"""A task statement rewritten as an issue a person would file, when a model is configured (``labbot eval generate``).

The generator writes a plain statement (symbol, signature, docstring, failing tests); a model, when
``ANTHROPIC_API_KEY`` is set, may turn it into the kind of issue a user files — what is broken and how it shows, not
how to fix it. The model sees only the statement (never the deleted code); the generator keeps the plain one if the
call fails or answers nothing. Lives in ``bot`` because ``labbot.evals`` takes the rewrite as a callable and knows
nothing of models.
"""

from __future__ import annotations

from collections.abc import Callable

import anthropic

from labbot.agents.fleet.model import ModelSettings

PROMPT = """\
Rewrite the task below as a GitHub issue that a user of this library would file. Say what is broken and how it \
shows (which calls fail, with which names), in a few short paragraphs; keep every symbol, file and test name exactly \
as given. Do not say how to implement the fix and do not invent behaviour the task does not state. Answer with the \
issue's text only: a title line, a blank line, then the body.

<task>
{statement}
</task>"""
MAX_TOKENS = 1024


def statement_rewriter(settings: ModelSettings) -> Callable[[str], str] | None:
    """The rewrite for ``generate_suite(rewrite=...)``, or None when no model is configured."""
    if not settings.configured:
        return None
    client = anthropic.Anthropic(
        api_key=settings.api_key, base_url=settings.base_url, max_retries=2, timeout=settings.timeout_s
    )

    def rewrite(statement: str) -> str:
        reply = client.messages.create(
            model=settings.model,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": PROMPT.format(statement=statement)}],
        )
        return "".join(block.text for block in reply.content if block.type == "text").strip()

    return rewrite
