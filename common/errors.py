"""The control plane's error tree, translated once at each front door (HTTP JSON, CLI exit message, Slack).

LabbotError                 what went wrong + what would be right; ``status`` is the HTTP status to answer
├── BadRequest (400)        malformed input: bad KEY=VALUE, bad duration, unknown parameter
│   └── UnknownJob (404)    no such job in the registry
├── UnknownRun (404)        no such run id
├── UnknownPage (404)       no such page (incident) id
├── UnknownExperiment (404) no such experiment id
├── Conflict (409)          the run is in a state where that action makes no sense
├── Unauthorized (401)      missing or wrong bearer token
├── RayUnavailable (503)    the Ray dashboard did not answer; names the address, never the token
└── DatabaseUnavailable (503)  the database did not answer (restarting, unreachable); says so by kind only
"""

from __future__ import annotations


class LabbotError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(LabbotError):
    status = 400
    code = "bad_request"


class UnknownJob(BadRequest):
    status = 404
    code = "unknown_job"


class UnknownRun(LabbotError):
    status = 404
    code = "unknown_run"


class UnknownPage(LabbotError):
    status = 404
    code = "unknown_page"


class UnknownExperiment(LabbotError):
    status = 404
    code = "unknown_experiment"


class UnknownResearch(LabbotError):
    status = 404
    code = "unknown_research"


class UnknownFeedback(LabbotError):
    status = 404
    code = "unknown_feedback"


class Conflict(LabbotError):
    status = 409
    code = "conflict"


class Forbidden(LabbotError):
    status = 403
    code = "forbidden"


class Unauthorized(LabbotError):
    status = 401
    code = "unauthorized"


class RayUnavailable(LabbotError):
    status = 503
    code = "ray_unavailable"


class DatabaseUnavailable(LabbotError):
    status = 503
    code = "database_unavailable"


ERRORS_BY_CODE: dict[str, type[LabbotError]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        UnknownJob,
        UnknownRun,
        UnknownPage,
        Conflict,
        Unauthorized,
        RayUnavailable,
        DatabaseUnavailable,
    )
}
