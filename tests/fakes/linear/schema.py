"""Linear's published schema (``linear-schema.graphql``, one of the vendor specs: make specs), built once, and
`check`: why Linear would refuse a request before running it. `LinearFake` (fake.py) checks every request with it and
executes the valid ones against the same schema."""

from __future__ import annotations

import functools
from typing import Any

import graphql
from graphql.execution.values import get_variable_values
from vendor_specs import spec_path

SCHEMA = "linear-schema.graphql"


@functools.cache
def linear_schema() -> graphql.GraphQLSchema:
    """Linear's published schema, built once per process (≈0.8 s: the SDL is 1.2 MB); missing, the test that needs
    it is skipped (in CI: fails), see `vendor_specs.spec_path`."""
    return graphql.build_schema(spec_path(SCHEMA).read_text(), no_location=True)


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
