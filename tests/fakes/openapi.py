"""Requests checked against a vendor's published OpenAPI 3 document (the vendor specs: make specs): the Notion and
Datadog fakes call :meth:`OpenApiSpec.check` on every request they receive, so a request the real service would reject
fails the test that sent it.

What is checked, for ``check(method, path, query=..., headers=..., body=...)``:

* the path matches one of the document's path templates (``/v1/pages/{page_id}``) and the method is one it lists;
* every required parameter is there — path, query, header (``Notion-Version``) — and no query parameter the
  operation does not list is sent; a parameter with an ``enum`` has one of its values;
* a required request body is sent; in the body, every ``required`` property is present at every depth the schema
  describes (``$ref`` followed; for ``oneOf``/``anyOf`` at least one branch must hold), each present property has the
  schema's JSON type (``integer``, ``string``, ``object``, ``array``, ...) and a string with an ``enum`` has one of its
  values. ``strict=True`` also refuses properties an object schema does not list (where it lists some and does not
  allow others).

Notion's document (from notion-mcp-server) types a few members loosely (``children`` items as ``string``, ``icon``
as a string of format ``json``); values under such a member are JSON in the real API, so a ``string`` schema with
``format: json`` accepts any JSON value, and an array of ``string`` items accepts objects. Nothing else is relaxed.

``OpenApiSpec.load(name)`` reads a document once per test session (through `vendor_specs.spec_path`): a missing one
skips the test that needs it, and fails it with ``CI=true``. The fakes load theirs when they are built, in the test's
thread, so that happens before the test runs.

Why not openapi-core (0.23.1, tried 2026-12-01 on these two documents, which it loads, 3.1 and 3.0 alike): it checks
the path template, the method, required path/query/header parameters, enums, integer path parameters and body
``required`` fields and types at every depth through ``$ref``/``oneOf``/``anyOf`` — but, as JSON Schema does,

* it accepts query parameters an operation does not list: ``GET /v1/blocks/{id}/children?start_cursorr=x`` (a typo)
  and Datadog's ``GET /api/v1/query?...&step=5`` pass it, where this check refuses both (test_datadog's
  ``test_the_fake_refuses_requests_the_published_api_does_not_allow`` asserts the ``step`` refusal);
* it refuses requests the real Notion accepts, because Notion's document is narrower than Notion's API: block
  requests list only paragraph and bulleted_list_item and forbid other members (``additionalProperties: false``), so
  ``PATCH /v1/blocks/{id}/children`` with a ``heading_1`` block, or a paragraph with ``"object": "block"``, is refused;
  ``POST /v1/pages`` types ``children`` items and ``icon``/``cover`` as strings, so a page created with its blocks
  or an emoji icon is refused. Loosening that needs a patched copy of the document, and the unknown-query check
  would still be ours;
* it is slower on every request the fakes check: 1.7 ms against 0.013 ms for a Notion search, 30 ms against 2.5 ms
  for 100 appended paragraphs, 3.7 ms against 0.035 ms for Datadog's monitor list; 3.6 s against 1.2 s to load
  Datadog's document.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from vendor_specs import spec_path

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


class SpecViolation(AssertionError):
    """A request the vendor's published description does not allow."""


@dataclass(frozen=True)
class Operation:
    method: str
    template: str  # the path template that matched, e.g. /v1/pages/{page_id}
    path_params: dict[str, str]
    spec: dict[str, Any]


class OpenApiSpec:
    def __init__(self, doc: dict[str, Any], name: str) -> None:
        self.doc = doc
        self.name = name
        self._templates = [(t, _template_regex(t)) for t in doc["paths"]]

    @classmethod
    def load(cls, filename: str) -> OpenApiSpec:
        return _load(filename)

    def resolve(self, node: Any) -> Any:
        """``node`` with a top-level ``$ref`` followed (repeatedly)."""
        while isinstance(node, Mapping) and "$ref" in node:
            ref = str(node["$ref"])
            if not ref.startswith("#/"):
                raise SpecViolation(f"{self.name}: external $ref {ref} is not supported")
            target: Any = self.doc
            for part in ref[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def operation(self, method: str, path: str) -> Operation:
        method = method.lower()
        for template, regex in self._templates:
            m = regex.fullmatch(path)
            if m is None:
                continue
            item = self.doc["paths"][template]
            if method not in item:
                allowed = sorted(k.upper() for k in item if k in {"get", "post", "put", "patch", "delete"})
                raise SpecViolation(f"{self.name}: {method.upper()} {path} is not allowed ({template}: {allowed})")
            op = dict(item[method])
            op["parameters"] = [*item.get("parameters", []), *op.get("parameters", [])]
            return Operation(method, template, m.groupdict(), op)
        raise SpecViolation(f"{self.name}: no path {path} in the published API")

    def check(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        strict: bool = False,
    ) -> Operation:
        op = self.operation(method, path)
        where = f"{self.name}: {method.upper()} {op.template}"
        query = dict(query or {})
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        listed: set[str] = set()
        for raw in op.spec["parameters"]:
            param = self.resolve(raw)
            name, where_in = param["name"], param["in"]
            if where_in == "query":
                listed.add(name)
                value = query.get(name)
            elif where_in == "header":
                value = lowered.get(name.lower())
            elif where_in == "path":
                value = op.path_params.get(name)
            else:
                continue
            if value is None:
                if param.get("required"):
                    raise SpecViolation(f"{where}: required {where_in} parameter {name!r} is missing")
                continue
            schema = self.resolve(param.get("schema") or {})
            if "enum" in schema and str(value) not in [str(e) for e in schema["enum"]]:
                raise SpecViolation(f"{where}: {where_in} parameter {name}={value!r} is not one of {schema['enum']}")
            if schema.get("type") == "integer" and not re.fullmatch(r"-?\d+", str(value)):
                raise SpecViolation(f"{where}: {where_in} parameter {name}={value!r} is not an integer")
        unknown = sorted(set(query) - listed)
        if unknown:
            raise SpecViolation(f"{where}: query parameter(s) {unknown} are not in the published API")
        request_body = self.resolve(op.spec.get("requestBody") or {})
        if body is None:
            if request_body.get("required"):
                raise SpecViolation(f"{where}: a request body is required")
        elif request_body:
            content = request_body.get("content") or {}
            media = content.get("application/json") or next(iter(content.values()), {})
            self.check_value(media.get("schema") or {}, body, where, "body", strict=strict)
        elif method.lower() in {"get", "delete"} and body not in ({}, None):
            raise SpecViolation(f"{where}: sends a body the published API does not take")
        return op

    def check_value(self, schema: Any, value: Any, where: str, at: str, *, strict: bool = False) -> None:
        schema = self.resolve(schema)
        if not isinstance(schema, Mapping) or not schema:
            return
        for key in ("oneOf", "anyOf"):
            if key in schema:
                problems = []
                for branch in schema[key]:
                    try:
                        self.check_value(branch, value, where, at, strict=strict)
                        break
                    except SpecViolation as e:
                        problems.append(str(e).split(": ", 2)[-1])
                else:
                    raise SpecViolation(f"{where}: {at} matches none of its {key} shapes ({'; '.join(problems[:3])})")
        for branch in schema.get("allOf", []):
            self.check_value(branch, value, where, at, strict=strict)
        if value is None and schema.get("nullable"):
            return
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind else []
        if kinds:
            if "string" in kinds and schema.get("format") == "json":
                return  # Notion's loosely typed members: JSON values in the real API
            ok = any(isinstance(value, _JSON_TYPES.get(k, ())) for k in kinds)
            if isinstance(value, bool) and "boolean" not in kinds:
                ok = False
            if not ok:
                raise SpecViolation(f"{where}: {at} should be {'/'.join(kinds)}, not {type(value).__name__}")
        if isinstance(value, str) and "enum" in schema and value not in schema["enum"]:
            raise SpecViolation(f"{where}: {at}={value!r} is not one of {schema['enum']}")
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            for name in schema.get("required", []):
                if name not in value:
                    raise SpecViolation(f"{where}: {at} lacks the required field {name!r}")
            for name, member in value.items():
                if name in props:
                    self.check_value(props[name], member, where, f"{at}.{name}", strict=strict)
                elif strict and props and schema.get("additionalProperties") is False:
                    raise SpecViolation(f"{where}: {at} has a field {name!r} the published API does not list")
        if isinstance(value, list) and "items" in schema:
            items = self.resolve(schema["items"])
            if isinstance(items, Mapping) and items.get("type") == "string" and "enum" not in items:
                return  # Notion's block arrays, typed as strings in its document
            for i, member in enumerate(value):
                self.check_value(items, member, where, f"{at}[{i}]", strict=strict)

    def check_response(self, method: str, path: str, status: int, body: Any) -> None:
        """A fake's answer against the response schema the document gives for ``status`` (fakes stay honest)."""
        op = self.operation(method, path)
        responses = op.spec.get("responses") or {}
        response = self.resolve(responses.get(str(status)) or responses.get("default") or {})
        media = (response.get("content") or {}).get("application/json") or {}
        if media.get("schema"):
            self.check_value(media["schema"], body, f"{self.name}: answer to {method.upper()} {op.template}", "body")


def _template_regex(template: str) -> re.Pattern[str]:
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
    return re.compile(pattern)


@functools.cache
def _load(filename: str) -> OpenApiSpec:
    path = spec_path(filename)
    text = path.read_text()
    doc = (
        json.loads(text)
        if path.suffix == ".json"
        else yaml.load(text, Loader=getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader)
    )
    return OpenApiSpec(doc, path.name)
