"""Linear for labbot's tests: its GraphQL endpoint, checked against Linear's published schema, over in-memory state.

`LinearFake` answers ``POST /graphql`` by really executing each request with graphql-core against the schema built
from ``linear-schema.graphql``, one of the vendor specs (make specs; missing: the test is skipped, in CI it fails),
with resolvers over its teams, workflow states, labels, users, issues and comments, so answers have exactly the
schema's shapes.
Connections honour ``first``/``after`` (cursors are ids) and ``filter`` (the comparators and ``and``/``or``/``null``
Linear documents). Use it in-process (``httpx.ASGITransport(fake.app)``, see `transport()`) or over real HTTP from
a daemon thread (`start()`/`stop()`/`url`, or ``with LinearFake() as fake:``) for a ``labbot serve`` subprocess
given ``LINEAR_API_URL=fake.url``.

Every request is checked, whatever is answered: a body that is not ``{"query": ..., "variables": {...}}``, a
document the schema refuses (`graphql.validate`), variables that do not coerce to their declared types, or a
variable the operation does not declare is recorded in `violations` and answered as Linear does (HTTP 400,
``extensions.code: "GRAPHQL_VALIDATION_FAILED"``). What the fake itself cannot answer (a filter or argument it does
not implement, a field it has no value for) is recorded there too, so a test asserting ``fake.violations == []``
notices. ``Authorization`` must be the fake's key (raw; ``Bearer`` for ``lin_oauth`` tokens): otherwise 401 (none)
or 400 (wrong) with ``AUTHENTICATION_ERROR``.

Seed with `add_team` (with workflow states and labels), `add_label`, `add_user`, `add_issue`, `add_comment`; read
`issues`, `comments`, `issue(ref)`, `requests` and `operations`. `fail_next` queues injected answers (429
RATELIMITED, 5xx, a malformed body, a 200 with an ``errors`` array); `hang_next` makes requests hang until the
client gives up (a timeout) or `release()`.

The package, one concept a module: ``schema.py`` (Linear's published schema and the checks of a request against
it), ``errors.py`` (the errors Linear answers, and what the fake does not implement), ``state.py`` (the entities
in memory, how tests seed them and how they change), ``filters.py`` (Linear's filter objects), ``resolvers.py``
(the GraphQL views, connections and mutations over the state) and ``fake.py`` (`LinearFake`: the HTTP endpoint,
its records and the failures tests inject).
"""

from fakes.linear.errors import NOT_AUTHENTICATED, RATELIMITED, LinearError, Unsupported, graphql_error
from fakes.linear.fake import API_KEY, LinearFake, SeenRequest
from fakes.linear.schema import SCHEMA, check, linear_schema
from fakes.linear.state import PRIORITY_LABELS, STATES, Comment, Issue, Label, State, Team, User

__all__ = [
    "API_KEY",
    "NOT_AUTHENTICATED",
    "PRIORITY_LABELS",
    "RATELIMITED",
    "SCHEMA",
    "STATES",
    "Comment",
    "Issue",
    "Label",
    "LinearError",
    "LinearFake",
    "SeenRequest",
    "State",
    "Team",
    "Unsupported",
    "User",
    "check",
    "graphql_error",
    "linear_schema",
]
