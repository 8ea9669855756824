"""The Anthropic Messages API for labbot's tests: a scripted ``POST /v1/messages``, served over real HTTP on 127.0.0.1.

`FakeAnthropic` serves from a uvicorn thread on a free port; point the real SDK at it
(``AsyncAnthropic(base_url=fake.base_url, api_key=fake.api_key)``, or ``ANTHROPIC_BASE_URL``). Each request takes
the next step of its script:

* a `Reply` (build one with `text`, `tool_use`, `tool_uses`): answered in the Messages API's shape — ``id``,
  ``type: "message"``, ``role``, ``model`` (the request's), content blocks with ``toolu_…`` ids, ``stop_reason``
  (``tool_use`` when it calls tools, else ``end_turn``) and ``usage`` with the cache fields. Usage is estimated at
  four characters a token; the prefix up to the last ``cache_control`` breakpoint (tools, then system) is reported
  as a cache write the first time the fake sees it and as a cache read after, as the API does for a warm cache.
  A reply's own ``usage`` overrides the estimate field by field;
* a callable taking the `SeenRequest` and returning a step: the "model" decides from the request (e.g. calls a tool
  whose name it reads from ``request.tool_names``).

A script is a list of steps (`script` appends), and/or one callable that answers whenever the list is empty (the
``model`` argument). A request with no step left is answered 400 with a message saying the script ran out.

Failures and slow answers come from `fakes.failures`, taken by a valid request before its step:
``fail_next(429, retry_after=7)`` (``rate_limit_error``), ``fail_next(529, times=2)`` (``overloaded_error``),
``fail_next(500)`` (``api_error``): the API's error body for the status, with a ``request-id``; ``hang_next(seconds=2)``
holds the request, and one the client gives up on meanwhile (its timeout) is recorded with status 499 and takes no
step.

Before any step, requests are checked as the API checks them: the key (``x-api-key``, or the ``Authorization:
Bearer`` header the 2.x SDK sends) ⇒ 401; ``anthropic-version``, unknown fields, ``model``, ``max_tokens``,
``system``, tool definitions (names ``^[a-zA-Z0-9_-]{1,64}$``, unique), at most 4 ``cache_control`` breakpoints,
and ``messages``: starts with user, roles alternate, no empty content or text, every ``tool_use`` of an assistant
message answered by a ``tool_result`` with its id in the next user message (results first), none unexpected,
tools defined whenever the history holds tool blocks ⇒ 400 ``invalid_request_error``. `check_messages` runs the
message checks alone, so a test can check a history it is about to persist.

Every request is kept in `requests` (in arrival order), with the status it was answered.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from fakes.failures import FailureInjection
from fakes.served import ServedFake
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

API_KEY = "sk-ant-" + "fake-labbot-tests-0000000000000000"  # fake, split: no scanner flags it
"""The key the fake accepts unless given another."""
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_OUTPUT_TOKENS = 128_000
FIELDS = frozenset(
    {
        "model", "max_tokens", "messages", "system", "tools", "tool_choice", "metadata", "stop_sequences", "stream",
        "temperature", "top_p", "top_k", "thinking", "cache_control", "container", "diagnostics", "inference_geo",
        "output_config", "service_tier", "speed",
    }
)  # fmt: skip
USER_BLOCKS = frozenset({"text", "image", "document", "search_result", "tool_result"})
ASSISTANT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})


# ----------------------------------------------------------------- script steps


@dataclass(frozen=True)
class Reply:
    content: tuple[Mapping[str, Any], ...]  # text and tool_use blocks; a tool_use without an id is given one
    stop_reason: str | None = None  # None: "tool_use" when the content calls a tool, else "end_turn"
    usage: Mapping[str, int] = field(default_factory=dict)  # overrides the estimate, field by field


Step: TypeAlias = "Reply | Callable[[SeenRequest], Step]"
ERRORS = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}
"""The API's error type and a message for each status it fails with (other 5xx: ``api_error``)."""


def text(answer: str, *, stop_reason: str | None = None, usage: Mapping[str, int] | None = None) -> Reply:
    """An answer in words (``end_turn`` unless told)."""
    return Reply(({"type": "text", "text": answer},), stop_reason, usage or {})


def tool_use(name: str, arguments: Mapping[str, Any] | None = None, *, say: str | None = None, **kwargs: Any) -> Reply:
    """One tool call, after ``say`` if given."""
    return tool_uses((name, arguments or {}), say=say, **kwargs)


def tool_uses(
    *calls: tuple[str, Mapping[str, Any]],
    say: str | None = None,
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> Reply:
    """Several tool calls in one answer, in this order."""
    blocks: list[Mapping[str, Any]] = [{"type": "text", "text": say}] if say else []
    blocks += [{"type": "tool_use", "name": name, "input": dict(arguments)} for name, arguments in calls]
    return Reply(tuple(blocks), stop_reason, usage or {})


# ----------------------------------------------------------------- what tests read


@dataclass
class SeenRequest:
    """One request to the fake and how it was answered (``status`` is None while a hang holds it)."""

    path: str
    headers: dict[str, str]  # lower-case names; the key headers are left out
    body: Any
    key_ok: bool
    status: int | None = None
    errors: tuple[str, ...] = ()  # why a 400 from validation was given

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools", [])) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        return [t.get("name", "") for t in self.tools]

    @property
    def system(self) -> Any:
        return self.body.get("system") if isinstance(self.body, dict) else None

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the last message (empty unless it answers tool calls)."""
        if not self.messages or isinstance(self.messages[-1].get("content"), str):
            return []
        return [b for b in self.messages[-1]["content"] if b.get("type") == "tool_result"]


class FakeAnthropic(ServedFake, FailureInjection):
    """The Messages API on 127.0.0.1; see the module docstring."""

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        model: Callable[[SeenRequest], Step] | None = None,
        api_key: str = API_KEY,
    ) -> None:
        self.api_key = api_key
        self._lock = threading.Condition()
        self._steps: deque[Step] = deque(script)
        self._model = model
        self._requests: list[SeenRequest] = []
        self._cached_prefixes: set[str] = set()
        self._ids = itertools.count(1)
        self.init_failures()
        self.app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])
        self.serve_app(self.app, "Anthropic fake", graceful_s=1)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the SDK's ``base_url``."""
        return self.url

    @property
    def requests(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._requests)

    def script(self, *steps: Step) -> None:
        """Queue steps after those already queued."""
        with self._lock:
            self._steps.extend(steps)

    def answer_with(self, model: Callable[[SeenRequest], Step] | None) -> None:
        """The callable that answers whenever the scripted steps have run out (None: none)."""
        with self._lock:
            self._model = model

    def reset(self) -> None:
        """Forget requests, steps, the callable, the cache and injected failures (the server keeps running)."""
        with self._lock:
            self._requests.clear()
            self._steps.clear()
            self._model = None
            self._cached_prefixes.clear()
        self.clear_failures()

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        """The API's error body for an injected status, with its ``request-id``."""
        return _error_answer(*ERRORS.get(status, ERRORS[500]))

    def wait_for_requests(self, n: int, *, answered: bool = False, timeout: float = 10.0) -> list[SeenRequest]:
        """The requests once there are at least ``n`` (and, with ``answered``, each has its status)."""

        def ready() -> bool:
            return len(self._requests) >= n and (not answered or all(r.status for r in self._requests))

        with self._lock:
            if not self._lock.wait_for(ready, timeout):
                seen = [r.status for r in self._requests]
                raise AssertionError(f"Anthropic fake: waited {timeout:g}s for {n} request(s), got {seen}")
            return list(self._requests)

    # ----------------------------------------------------------------- HTTP

    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() not in ("x-api-key", "authorization")}
        key_ok = request.headers.get("x-api-key") == self.api_key or (
            request.headers.get("authorization") == f"Bearer {self.api_key}"
        )
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        seen = SeenRequest(request.url.path, headers, body, key_ok)
        with self._lock:
            self._requests.append(seen)
            self._lock.notify_all()
        if not key_ok:
            return self._error(seen, 401, "authentication_error", "invalid x-api-key")
        errors = [] if "anthropic-version" in headers else ["anthropic-version: header is required"]
        errors += validate_request(body) if body is not None else ["request body is not valid JSON"]
        if errors:
            seen.errors = tuple(errors)
            return self._error(seen, 400, "invalid_request_error", "; ".join(errors))
        if not await self.hold_if_hanging(request, "POST /v1/messages"):
            self._answered(seen, 499)  # the client gave up (its timeout): nothing is answered
            return Response(status_code=499)
        failure = self.take_failure("POST /v1/messages")
        if failure is not None:
            self._answered(seen, failure.status)
            return failure.response()
        step = self._next_step()
        if step is None:
            message = f"FakeAnthropic: the script has no step left for request #{len(self.requests)}"
            return self._error(seen, 400, "invalid_request_error", message)
        while callable(step):
            step = step(seen)
        return self._reply(seen, step)

    def _next_step(self) -> Step | None:
        with self._lock:
            if self._steps:
                return self._steps.popleft()
            return self._model

    def _reply(self, seen: SeenRequest, reply: Reply) -> Response:
        content = []
        for block in reply.content:
            block = dict(block)
            if block.get("type") == "tool_use" and "id" not in block:
                block["id"] = "toolu_" + secrets.token_hex(12)
            content.append(block)
        calls = any(b.get("type") == "tool_use" for b in content)
        answer = {
            "id": f"msg_fake{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": seen.body["model"],
            "content": content,
            "stop_reason": reply.stop_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None,
            "usage": {**self._usage(seen.body, content), **reply.usage},
        }
        self._answered(seen, 200)
        headers = {"request-id": f"req_fake{secrets.token_hex(6)}"}
        if seen.body.get("stream"):
            return Response(sse_events(answer), media_type="text/event-stream", headers=headers)
        return JSONResponse(answer, headers=headers)

    def _answered(self, seen: SeenRequest, status: int) -> None:
        with self._lock:
            seen.status = status
            self._lock.notify_all()

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        prefix, rest = _cache_split(body)
        cached = _tokens(prefix) if prefix else 0
        with self._lock:
            warm = prefix in self._cached_prefixes
            if prefix:
                self._cached_prefixes.add(prefix)
        return {
            "input_tokens": _tokens(rest),
            "output_tokens": max(1, _tokens(json.dumps(content))),
            "cache_creation_input_tokens": 0 if warm else cached,
            "cache_read_input_tokens": cached if warm else 0,
        }

    def _error(self, seen: SeenRequest, status: int, kind: str, message: str) -> Response:
        self._answered(seen, status)
        body, headers = _error_answer(kind, message)
        return JSONResponse(body, status_code=status, headers=headers)


def _error_answer(kind: str, message: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The API's error body and its ``request-id`` header."""
    request_id = f"req_fake{secrets.token_hex(6)}"
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    return body, {"request-id": request_id}


# ----------------------------------------------------------------- the API's checks


STREAM_PIECE_CHARS = 8  # the text of a streamed answer comes in pieces this long, as a model's tokens do


def sse_events(message: dict[str, Any]) -> str:
    """``message`` as the Messages API streams it (``stream: true``): message_start, each block's start, deltas
    (text in pieces, a tool call's input as partial JSON) and stop, message_delta (the stop reason, output tokens),
    message_stop; server-sent events, as the SDK's ``messages.stream`` reads them."""

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    usage = dict(message["usage"])
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [event("message_start", {"message": start})]
    for i, block in enumerate(message["content"]):
        if block.get("type") == "text":
            out.append(event("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}))
            text = str(block.get("text") or "")
            for at in range(0, len(text), STREAM_PIECE_CHARS):
                piece = text[at : at + STREAM_PIECE_CHARS]
                out.append(event("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": piece}}))
        elif block.get("type") == "tool_use":
            empty = {**block, "input": {}}
            out.append(event("content_block_start", {"index": i, "content_block": empty}))
            partial = json.dumps(block.get("input") or {})
            out.append(
                event(
                    "content_block_delta", {"index": i, "delta": {"type": "input_json_delta", "partial_json": partial}}
                )
            )
        else:
            out.append(event("content_block_start", {"index": i, "content_block": block}))
        out.append(event("content_block_stop", {"index": i}))
    out.append(
        event(
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    out.append(event("message_stop", {}))
    return "".join(out)


def validate_request(body: Any) -> list[str]:
    """What the Messages API would answer 400 for in one non-streaming request body (empty: it is valid)."""
    if not isinstance(body, dict):
        return ["request body must be a JSON object"]
    errors = [f"{k}: Extra inputs are not permitted" for k in body if k not in FIELDS]
    model = body.get("model")
    if not isinstance(model, str) or not model:
        errors.append("model: Field required (a non-empty string)")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        errors.append("max_tokens: Field required (an integer)")
    elif not 0 <= max_tokens <= MAX_OUTPUT_TOKENS:
        errors.append(f"max_tokens: {max_tokens} is out of range (0 to {MAX_OUTPUT_TOKENS})")
    errors += _check_system(body.get("system"))
    tools = body.get("tools")
    errors += _check_tools(tools)
    errors += check_messages(body.get("messages"), tools_defined=bool(tools))
    breakpoints = _count_cache_control(body)
    if breakpoints > 4:
        errors.append(f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}.")
    return errors


def check_messages(messages: Any, *, tools_defined: bool = True) -> list[str]:
    """The API's checks of ``messages`` alone (empty: valid)."""
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    errors: list[str] = []
    seen_ids: set[str] = set()
    has_tool_blocks = False
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            errors.append(f"{where}: each message needs a role of 'user' or 'assistant'")
            continue
        errors += [f"{where}.{k}: Extra inputs are not permitted" for k in message if k not in ("role", "content")]
        role = message["role"]
        if i == 0 and role != "user":
            errors.append("messages: the first message must use the user role")
        elif i > 0 and isinstance(messages[i - 1], dict) and messages[i - 1].get("role") == role:
            errors.append(f"{where}: roles must alternate between user and assistant (two {role} messages in a row)")
        blocks = _content_blocks(message.get("content"), where, role, last=i == len(messages) - 1, errors=errors)
        has_tool_blocks |= any(b.get("type") in ("tool_use", "tool_result") for b in blocks)
        for j, block in enumerate(blocks):
            errors += _check_block(block, f"{where}.content.{j}", role, seen_ids)
        if role == "assistant":
            errors += _check_answered(messages, i, blocks)
        elif any(b.get("type") == "tool_result" for b in blocks) and (
            i == 0 or not isinstance(messages[i - 1], dict) or messages[i - 1].get("role") != "assistant"
        ):
            errors.append(f"{where}: tool_result blocks need tool_use blocks in the previous (assistant) message")
    if has_tool_blocks and not tools_defined:
        errors.append("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    return errors


def _content_blocks(content: Any, where: str, role: str, *, last: bool, errors: list[str]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content.strip():
            errors.append(f"{where}: text content must contain non-whitespace text")
        return []
    if not isinstance(content, list):
        errors.append(f"{where}.content: must be a string or a list of content blocks")
        return []
    if not content and not (last and role == "assistant"):
        errors.append(
            f"{where}: all messages must have non-empty content except for the optional final assistant message"
        )
    blocks = [b for b in content if isinstance(b, dict)]
    if len(blocks) != len(content):
        errors.append(f"{where}.content: every content block must be an object")
    return blocks


def _check_block(block: dict[str, Any], where: str, role: str, seen_ids: set[str]) -> list[str]:
    kind = block.get("type")
    allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
    if kind not in allowed:
        return [f"{where}.type: {kind!r} is not a valid content block in a {role} message"]
    errors = _check_cache_control(block.get("cache_control"), where)
    if kind == "text":
        if not isinstance(block.get("text"), str) or not block["text"].strip():
            errors.append(f"{where}: text content blocks must contain non-whitespace text")
    elif kind == "tool_use":
        block_id, name = block.get("id"), block.get("name")
        if not isinstance(block_id, str) or not TOOL_USE_ID.match(block_id):
            errors.append(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
        elif block_id in seen_ids:
            errors.append(f"{where}: `tool_use` ids must be unique: {block_id}")
        else:
            seen_ids.add(block_id)
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            errors.append(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        if not isinstance(block.get("input"), dict):
            errors.append(f"{where}.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        errors += _check_tool_result(block, where)
    elif kind == "thinking" and not all(isinstance(block.get(k), str) for k in ("thinking", "signature")):
        errors.append(f"{where}: thinking blocks need their thinking and signature, passed back as received")
    return errors


def _check_tool_result(block: dict[str, Any], where: str) -> list[str]:
    errors = []
    if not isinstance(block.get("tool_use_id"), str):
        errors.append(f"{where}.tool_use_id: Field required")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        errors.append(f"{where}.is_error: Input should be a valid boolean")
    content = block.get("content", "")
    if isinstance(content, list):
        for k, inner in enumerate(content):
            if not isinstance(inner, dict) or inner.get("type") not in ("text", "image", "document", "search_result"):
                errors.append(f"{where}.content.{k}: not a valid tool_result content block")
            elif inner["type"] == "text" and not (isinstance(inner.get("text"), str) and inner["text"].strip()):
                errors.append(f"{where}.content.{k}: text content blocks must contain non-whitespace text")
    elif not isinstance(content, str):
        errors.append(f"{where}.content: must be a string or a list of content blocks")
    return errors


def _check_answered(messages: list[Any], i: int, blocks: list[dict[str, Any]]) -> list[str]:
    """Every tool_use of assistant message ``i`` answered in message ``i + 1``, results first, none unexpected."""
    uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
    following = messages[i + 1] if i + 1 < len(messages) and isinstance(messages[i + 1], dict) else None
    if following is None or following.get("role") != "user":
        if uses:
            return [
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(map(str, uses))}. Each `tool_use` block must have a corresponding `tool_result` block "
                "in the next message."
            ]
        return []
    content = following.get("content")
    after = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    results = [b.get("tool_use_id") for b in after if b.get("type") == "tool_result"]
    errors = []
    missing = [u for u in uses if u not in results]
    if missing:
        errors.append(
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
            f"{', '.join(map(str, missing))}. Each `tool_use` block must have a corresponding `tool_result` block in "
            "the next message."
        )
    unexpected = [r for r in results if r not in uses]
    if unexpected:
        errors.append(
            f"messages.{i + 1}: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{', '.join(map(str, unexpected))}. Each `tool_result` block must have a corresponding `tool_use` "
            "block in the previous message."
        )
    if len(results) != len(set(results)):
        errors.append(f"messages.{i + 1}: each `tool_use` id may be answered by one `tool_result` only")
    kinds = [b.get("type") for b in after]
    if results and kinds[: len(results)] != ["tool_result"] * len(results):
        errors.append(f"messages.{i + 1}: tool_result blocks must come first in the message's content")
    return errors


def _check_system(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return ["system: must be a string or a list of text blocks"]
    errors = []
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            errors.append(f"system.{i}: must be a text block")
            continue
        if not isinstance(block.get("text"), str) or not block["text"].strip():
            errors.append(f"system.{i}: text content blocks must contain non-whitespace text")
        errors += _check_cache_control(block.get("cache_control"), f"system.{i}")
    return errors


def _check_tools(tools: Any) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: must be a list"]
    errors: list[str] = []
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            errors.append(f"tools.{i}: must be an object")
            continue
        if tool.get("type", "custom") != "custom":
            errors.append(f"tools.{i}.type: the fake knows only client tools, not {tool['type']!r}")
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            errors.append(f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$' (got {name!r})")
        elif name in names:
            errors.append(f"tools: Tool names must be unique ({name!r} appears twice)")
        else:
            names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            errors.append(f"tools.{i}.input_schema: must be a JSON Schema object with type 'object'")
        if "description" in tool and not isinstance(tool["description"], str):
            errors.append(f"tools.{i}.description: Input should be a valid string")
        extra = set(tool) - {"name", "description", "input_schema", "cache_control", "type"}
        errors += [f"tools.{i}.{k}: Extra inputs are not permitted" for k in sorted(extra)]
        errors += _check_cache_control(tool.get("cache_control"), f"tools.{i}")
    return errors


def _check_cache_control(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, dict) or value.get("type") != "ephemeral" or value.get("ttl", "5m") not in ("5m", "1h"):
        return [f"{where}.cache_control: must be {{'type': 'ephemeral'}} (ttl '5m' or '1h')"]
    return []


def _count_cache_control(body: dict[str, Any]) -> int:
    count = 0
    system = body.get("system")
    for part in (system if isinstance(system, list) else [], body.get("tools") or []):
        count += sum(1 for b in part if isinstance(b, dict) and b.get("cache_control"))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and b.get("cache_control"))
    return count


# ----------------------------------------------------------------- usage estimate


def _cache_split(body: dict[str, Any]) -> tuple[str, str]:
    """(the prompt prefix up to the last cache breakpoint among tools then system, the rest), as JSON text."""
    tools = list(body.get("tools") or [])
    system = body.get("system")
    system_blocks = system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else [])
    parts: list[Any] = [*tools, *system_blocks]
    cut = max((i + 1 for i, p in enumerate(parts) if isinstance(p, dict) and p.get("cache_control")), default=0)
    prefix = json.dumps(parts[:cut], sort_keys=True) if cut else ""
    rest = json.dumps([parts[cut:], body.get("messages")], sort_keys=True)
    return prefix, rest


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4
