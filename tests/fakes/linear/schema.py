"""Linear's published schema (``../shared/specs/linear-schema.graphql``), built once, and `check`: why Linear would
refuse a request before running it. `LinearFake` (fake.py) checks every request with it and executes the valid ones
against the same schema."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import graphql
from graphql.execution.values import get_variable_values

SPECS_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "specs"
SCHEMA_PATH = SPECS_DIR / "linear-schema.graphql"


@functools.cache
def linear_schema() -> graphql.GraphQLSchema:
    """Linear's published schema, built once per process (≈0.8 s: the SDL is 1.2 MB)."""
    if not SCHEMA_PATH.is_file():
        raise AssertionError(f"Linear's schema is missing at {SCHEMA_PATH}: the specs folder must sit beside the repo")
    return graphql.build_schema(SCHEMA_PATH.read_text(), no_location=True)


def check(query: Any, variables: Any = None, operation_name: str | None = None) -> list[str]:
    """Why Linear would refuse this request before running it (empty: it would not)."""
    if not isinstance(query, str) or not query.strip():
        return ["the body has no 'query' string"]
    if variables is not None and not isinstance(variables, dict):
        return ["'variables' must be an object"]
    try:
        document = graphql.parse(query)
    except graphql.GraphQLError as e:
        return [f"syntax error: {e.message}"]
    errors = [e.message for e in graphql.validate(linear_schema(), document)]
    operation = graphql.get_operation_ast(document, operation_name)
    if errors or operation is None:
        return errors or [f"no single operation to run (operationName {operation_name!r})"]
    definitions = operation.variable_definitions or ()
    declared = {d.variable.name.value for d in definitions}
    errors += [
        f"variable ${v} is sent but the operation does not declare it" for v in variables or {} if v not in declared
    ]
    coerced = get_variable_values(linear_schema(), definitions, variables or {})
    return errors + ([e.message for e in coerced] if isinstance(coerced, list) else [])
