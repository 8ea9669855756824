"""Linear's filter objects (``IssueFilter``, ``TeamFilter``...) evaluated over the fake's entities: the comparators
Linear documents, ``and``/``or``/``null``, and relations filtered by their own fields. A filter the fake cannot
evaluate raises `Unsupported`, so the test that sends it fails."""

from __future__ import annotations

from typing import Any

from fakes.linear.errors import Unsupported
from fakes.linear.state import Comment, Issue, Label, State, Team, User


def _fields(entity: Any) -> dict[str, Any]:
    """What a filter on ``entity`` can compare (relations are entities themselves, or None)."""
    if isinstance(entity, Team):
        return {"id": entity.id, "key": entity.key, "name": entity.name}
    if isinstance(entity, State):
        return {"id": entity.id, "name": entity.name, "type": entity.type, "team": entity.team}
    if isinstance(entity, Label):
        return {"id": entity.id, "name": entity.name, "team": entity.team}
    if isinstance(entity, User):
        return {"id": entity.id, "name": entity.name, "displayName": entity.display_name, "email": entity.email}
    if isinstance(entity, Issue):
        return {
            "id": entity.id, "number": entity.number, "title": entity.title, "priority": entity.priority,
            "team": entity.team, "state": entity.state, "assignee": entity.assignee,
        }  # fmt: skip
    if isinstance(entity, Comment):
        return {"id": entity.id, "body": entity.body, "user": entity.user, "issue": entity.issue}
    raise Unsupported(f"filtering {type(entity).__name__}")


_RELATIONS = {"team", "state", "assignee", "user", "issue"}
_COMPARATORS: dict[str, Any] = {
    "eq": lambda v, a: v == a,
    "neq": lambda v, a: v != a,
    "in": lambda v, a: v in a,
    "nin": lambda v, a: v not in a,
    "gt": lambda v, a: v > a,
    "gte": lambda v, a: v >= a,
    "lt": lambda v, a: v < a,
    "lte": lambda v, a: v <= a,
    "eqIgnoreCase": lambda v, a: str(v).casefold() == a.casefold(),
    "neqIgnoreCase": lambda v, a: str(v).casefold() != a.casefold(),
    "contains": lambda v, a: a in str(v),
    "containsIgnoreCase": lambda v, a: a.casefold() in str(v).casefold(),
    "containsIgnoreCaseAndAccent": lambda v, a: a.casefold() in str(v).casefold(),
    "notContains": lambda v, a: a not in str(v),
    "notContainsIgnoreCase": lambda v, a: a.casefold() not in str(v).casefold(),
    "startsWith": lambda v, a: str(v).startswith(a),
    "startsWithIgnoreCase": lambda v, a: str(v).casefold().startswith(a.casefold()),
    "notStartsWith": lambda v, a: not str(v).startswith(a),
    "endsWith": lambda v, a: str(v).endswith(a),
    "notEndsWith": lambda v, a: not str(v).endswith(a),
}


def _matches(entity: Any, flt: dict[str, Any]) -> bool:
    """Whether ``entity`` (None for an unset nullable relation) satisfies a Linear filter."""
    for key, cond in flt.items():
        if cond is None:
            continue
        if key == "and":
            ok = all(_matches(entity, f) for f in cond)
        elif key == "or":
            ok = any(_matches(entity, f) for f in cond)
        elif key == "null":
            ok = (entity is None) == cond
        elif entity is None:
            ok = False
        else:
            fields = _fields(entity)
            if key not in fields:
                raise Unsupported(f"filtering {type(entity).__name__} by {key!r}")
            ok = _matches(fields[key], cond) if key in _RELATIONS else _compare(fields[key], cond)
        if not ok:
            return False
    return True


def _compare(value: Any, comparator: dict[str, Any]) -> bool:
    for op, arg in comparator.items():
        if arg is None:
            continue
        if op not in _COMPARATORS:
            raise Unsupported(f"the comparator {op!r}")
        if not _COMPARATORS[op](value, arg):
            return False
    return True
