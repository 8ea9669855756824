"""Notion for labbot's tests: the public API (version 2025-09-03) over pages, blocks, data sources and comments kept
in memory, as a Starlette app.

Use it in process (``httpx.ASGITransport(fake.app)``, or ``fake.transport()``) or over real HTTP on 127.0.0.1
(``with NotionFake() as fake:`` / ``start()``/``stop()``; ``fake.url`` is the ``NOTION_API_URL`` a ``labbot serve``
subprocess is given). Every request is checked, in this order, and a failing one answered as Notion answers it:

* ``Authorization: Bearer <fake.token>``, else 401 ``unauthorized`` (not a violation: tests send wrong tokens);
* ``Notion-Version`` equal to the pinned version, the request against ``notion-openapi.json`` (method, path,
  parameters, body), ids that are UUIDs, ``page_size`` ≤ 100, at most 100 blocks in any ``children`` array, two
  levels of nesting and 1,000 blocks in one request, block types Notion creates (children only where a block
  takes them, code languages from Notion's list, table rows as wide as their table), rich text of at most 100
  objects with at most 2,000 characters each, properties that the parent has — else 400 ``validation_error``,
  and the reason appended to ``fake.violations``, which tests assert stays empty.

Then ``fail_next(status, headers=..., body=...)`` answers instead (a str body is sent as a non-JSON page), and
``hang_next()`` holds a request until ``release()`` (or ``stop()``) so that clients time out. Seed with
``add_page`` / ``add_data_source``; read with ``created_pages()``, ``page``, ``tree`` (blocks with ``children``
attached), ``page_markdown``, ``comments`` and ``requests``.

The package, one concept a module: ``errors.py`` (Notion's error bodies and the two refusals, `Invalid` and
`NotFound`), ``content.py`` (block types, rich text and the limits on them), ``store.py`` (pages, blocks, data
sources and comments in memory, how tests seed and read them), ``endpoints.py`` (the API's answers over the store)
and ``fake.py`` (`NotionFake`: the HTTP handler, its records and the failures tests inject).
"""

from fakes.notion.content import CREATABLE, LANGUAGES, TAKES_CHILDREN, TEXT_BLOCKS
from fakes.notion.errors import CODES, Invalid, NotFound
from fakes.notion.fake import TOKEN, VERSION, NotionFake, SeenRequest
from fakes.notion.store import BOT, EMPTY, CreatedPage

__all__ = [
    "BOT",
    "CODES",
    "CREATABLE",
    "EMPTY",
    "LANGUAGES",
    "TAKES_CHILDREN",
    "TEXT_BLOCKS",
    "TOKEN",
    "VERSION",
    "CreatedPage",
    "Invalid",
    "NotFound",
    "NotionFake",
    "SeenRequest",
]
