"""Datadog for labbot's tests: the parts of its API the ``datadog`` MCP server uses, as a Starlette app.

Use it in process (``httpx.ASGITransport(fake.app)``, or ``fake.transport()``) or over real HTTP on 127.0.0.1
(``with DatadogFake() as dd:`` / `start()` / `stop()`; `url` is the base URL to give ``DD_API_URL``).

Every request is checked before it is answered, and a request the real service would refuse is answered 400
``{"errors": [...]}`` AND recorded in `violations` (tests assert it stays empty):

* v1 (``/api/v1/...``) against Datadog's published document, ``datadog-v1-openapi.yaml`` (the vendor specs: make
  specs), with :meth:`OpenApiSpec.check`: method, path, required and unknown query parameters
  (``from``/``to``/``query``...), enums, the body's shape;
* ``POST /api/v2/logs/events/search`` (not in that document) by hand, after Datadog's v2 docs: a JSON content type,
  a body whose ``filter.query/from/to`` are strings (``from``/``to`` ISO-8601, epoch milliseconds or ``now-15m``),
  ``page.limit`` 1..1000, ``page.cursor`` one this fake gave, ``sort`` ``timestamp`` or ``-timestamp``.

Then the keys: ``DD-API-KEY`` and ``DD-APPLICATION-KEY`` must equal the fake's, else 403 ``{"errors":
["Forbidden"]}``. v1 answers are checked too (:meth:`OpenApiSpec.check_response`; a metric answer's pointlists with
only their first points, to keep 100,000-point series cheap); a drift is recorded in `violations` as ``answer: ...``.

Seeded data, in memory: `add_series` (pointlists of ``[ms, value]``), `add_log`, `add_monitor` (with
``overall_state`` and per-group states), `add_event`. Muting creates a v1 downtime, kept in `downtimes`.

`fail_next(status, headers=..., body=..., on=...)` (`fakes.failures`) queues injected answers (403, 404, 429 with
``Retry-After`` or ``X-RateLimit-Reset``, 500/503, a non-JSON page as ``str``), given after the request is checked
and before the keys are; `hang_next(times, seconds=...)` holds the next requests that long (or until
`release()`/`stop()`, or the client hangs up) before answering them normally — for client timeouts over real HTTP.
The metric query syntax understood is ``aggr:metric{tags}`` with an optional ``by {...}`` and ``.fn(...)`` suffixes
(each seeded series matching the scope is answered as is); log search understands ``key:value`` (``*`` wildcards;
service, status, host, tags, ``@attributes``), ``-`` negation, ``*`` and free words matched against the message.

The package, one concept a module: ``store.py`` (the seeded series, logs, monitors, events and downtimes),
``checks.py`` (what Datadog would refuse: v1 against its OpenAPI document, the v2 logs search by hand),
``endpoints.py`` (the answers: metric queries, log search, monitors, events, downtimes) and ``fake.py``
(`DatadogFake`: the HTTP handler, its records and the failures tests inject).
"""

from fakes.datadog.checks import LOGS_SEARCH, MAX_LOGS_PAGE
from fakes.datadog.fake import API_KEY, APP_KEY, DatadogFake, SeenRequest

__all__ = ["API_KEY", "APP_KEY", "LOGS_SEARCH", "MAX_LOGS_PAGE", "DatadogFake", "SeenRequest"]
