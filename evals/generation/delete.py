"""Deleting a feature from a Python source file, and planting a canary in the original: pure text functions.

A *symbol* is a function defined at module level or a method of a class (classes nest: ``Outer.Inner.method``);
functions nested inside functions, and definitions under ``if``/``try``, are not symbols. Two deletions:

- :func:`delete_body` (Commit0-style): the signature, decorators and docstring stay, every statement after the
  docstring goes — with the comments inside the body — and the body becomes ``raise NotImplementedError("restore
  SYMBOL")``;
- :func:`delete_function`: the whole definition goes, decorators included.

:func:`plant_canary` puts a comment line with the canary inside the body, in the region :func:`delete_body` removes,
so the canary is in what was deleted and nowhere else.

Every result is parsed again before it is returned; what cannot be deleted safely (a symbol defined twice, a body
that is only a docstring or ``pass``, the only member of a class, a file that does not parse) is refused with
:class:`BadRequest`. Positions come from :mod:`ast` (columns are UTF-8 byte offsets; lines split on ``\\n`` only,
as the parser does, so a form feed in a comment does not shift them).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

from labbot.common.errors import BadRequest
from labbot.common.python_ast import parse_python

Deletion = Literal["body", "function"]
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
ABSTRACT_DECORATORS = ("overload", "abstractmethod", "abc.abstractmethod", "typing.overload")


@dataclass(frozen=True)
class Symbol:
    """One deletable definition of a file, as the generator chooses among them."""

    qualname: str  # ``function``, ``Class.method``, ``Outer.Inner.method``
    lineno: int  # the ``def`` line (1-based)
    first_line: int  # the first line of the definition, decorators included
    end_line: int  # the last line of the definition
    signature: str  # ``def name(args) -> ret`` (``async def`` for coroutines)
    decorators: tuple[str, ...]
    docstring: str | None
    body_lines: frozenset[int]  # the lines of the statements :func:`delete_body` removes (what coverage reports)
    statements: int  # statements in that body (nested ones included)
    size: int  # AST nodes in that body: how much there is to restore
    ambiguous: bool  # the same qualified name is defined twice in the file (a property setter, a redefinition)
    abstract: bool  # ``@overload`` or ``@abstractmethod``: its body is not the feature

    @property
    def deletable(self) -> bool:
        return self.statements > 0 and not self.ambiguous


@dataclass(frozen=True)
class _Found:
    qualname: str
    node: FunctionNode
    parent: ast.Module | ast.ClassDef


def _lines(text: str) -> list[str]:
    """``text`` split after each ``\\n`` (the line ends kept), the way the parser counts lines."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _parse(source: str, what: str) -> ast.Module:
    try:
        return parse_python(source)
    except (SyntaxError, ValueError) as exc:
        raise BadRequest(
            f"{what} is not valid Python ({exc}): only files that parse can have a feature deleted"
        ) from exc


def _walk(tree: ast.Module) -> list[_Found]:
    found: list[_Found] = []

    def visit(parent: ast.Module | ast.ClassDef, prefix: str) -> None:
        for node in parent.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append(_Found(prefix + node.name, node, parent))
            elif isinstance(node, ast.ClassDef):
                visit(node, f"{prefix}{node.name}.")

    visit(tree, "")
    return found


def _docstring_node(node: FunctionNode) -> ast.stmt | None:
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def _rest(node: FunctionNode) -> list[ast.stmt]:
    """The statements after the docstring: the feature."""
    return node.body[1:] if _docstring_node(node) is not None else list(node.body)


def _is_placeholder(stmts: list[ast.stmt]) -> bool:
    """``pass``, ``...`` or ``raise NotImplementedError``: nothing to restore."""
    if len(stmts) != 1:
        return False
    only = stmts[0]
    if isinstance(only, ast.Pass):
        return True
    if isinstance(only, ast.Expr) and isinstance(only.value, ast.Constant) and only.value.value is Ellipsis:
        return True
    if isinstance(only, ast.Raise) and only.exc is not None:
        exc = only.exc.func if isinstance(only.exc, ast.Call) else only.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def signature(node: FunctionNode) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode()[:byte_col].decode(errors="replace"))


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _is_comment_or_blank(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


@dataclass(frozen=True)
class _Region:
    """Where a body's statements are in the file: whole lines ``start..end`` (1-based), or, for a body on the
    ``def`` line itself (``def f(x): return x``), from column ``col`` of line ``start`` to the end of line ``end``."""

    start: int
    end: int
    inline: bool
    col: int  # characters, inline bodies only
    indent: str  # the body's indentation (block bodies)
    newline: str


def _region(lines: list[str], node: FunctionNode) -> _Region:
    rest = _rest(node)
    first, last = rest[0], rest[-1]
    assert last.end_lineno is not None
    line = lines[first.lineno - 1]
    col = _char_col(line, first.col_offset)
    newline = "\r\n" if line.endswith("\r\n") else "\n"
    if line[:col].strip():
        return _Region(first.lineno, last.end_lineno, True, col, "", newline)
    indent = line[:col]
    doc = _docstring_node(node)
    floor = doc.end_lineno if doc is not None and doc.end_lineno is not None else node.lineno
    start = first.lineno
    # comments between the header (or docstring) and the first statement belong to the body
    while start - 1 > floor and _is_comment_or_blank(lines[start - 2]):
        start -= 1
    while start < first.lineno and not lines[start - 1].strip():
        start += 1
    end = last.end_lineno
    # and so do comments after the last statement, indented as the body
    probe = end
    while probe < len(lines) and _is_comment_or_blank(lines[probe]):
        text = lines[probe]
        if text.strip() and not (_indent(text).startswith(indent) and len(_indent(text)) >= len(indent)):
            break
        probe += 1
        if text.strip():
            end = probe
    return _Region(start, end, False, 0, indent, newline)


def _find(source: str, symbol: str, what: str) -> tuple[list[str], _Found]:
    tree = _parse(source, what)
    found = _walk(tree)
    matches = [f for f in found if f.qualname == symbol]
    if not matches:
        known = ", ".join(f.qualname for f in found[:20]) or "none"
        raise BadRequest(
            f"{what} has no function or method {symbol!r} (module-level functions and methods of classes: {known})"
        )
    if len(matches) > 1:
        lines = ", ".join(str(m.node.lineno) for m in matches)
        raise BadRequest(f"{symbol!r} is defined {len(matches)} times in {what} (lines {lines}): cannot delete one")
    match = matches[0]
    if not _rest(match.node) or _is_placeholder(_rest(match.node)):
        raise BadRequest(f"{symbol!r} in {what} has no body to delete (only a docstring, pass, ... or a raise)")
    return _lines(source), match


def symbols(source: str, what: str = "the file") -> list[Symbol]:
    """Every module-level function and method in ``source``, in file order."""
    tree = _parse(source, what)
    found = _walk(tree)
    counts: dict[str, int] = {}
    for f in found:
        counts[f.qualname] = counts.get(f.qualname, 0) + 1
    out = []
    for f in found:
        node = f.node
        rest = _rest(node)
        placeholder = not rest or _is_placeholder(rest)
        nodes = [n for stmt in rest for n in ast.walk(stmt)]
        decorators = tuple(ast.unparse(d) for d in node.decorator_list)
        first_line = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        assert node.end_lineno is not None
        out.append(
            Symbol(
                qualname=f.qualname,
                lineno=node.lineno,
                first_line=first_line,
                end_line=node.end_lineno,
                signature=signature(node),
                decorators=decorators,
                docstring=ast.get_docstring(node),
                body_lines=frozenset(n.lineno for n in nodes if isinstance(n, ast.stmt))
                if not placeholder
                else frozenset(),
                statements=0 if placeholder else sum(isinstance(n, ast.stmt) for n in nodes),
                size=0 if placeholder else len(nodes),
                ambiguous=counts[f.qualname] > 1,
                abstract=any(d in ABSTRACT_DECORATORS for d in decorators),
            )
        )
    return out


def _checked(new: str, what: str, symbol: str) -> str:
    try:
        parse_python(new)
    except (SyntaxError, ValueError) as exc:
        raise BadRequest(f"deleting {symbol!r} from {what} would leave a file that does not parse ({exc})") from exc
    return new


def placeholder(symbol: str) -> str:
    return f'raise NotImplementedError("restore {symbol}")'


def delete_body(source: str, symbol: str, what: str = "the file") -> str:
    """``source`` with ``symbol``'s body (everything after its docstring) replaced by ``raise NotImplementedError``."""
    lines, found = _find(source, symbol, what)
    region = _region(lines, found.node)
    if region.inline:
        head = lines[region.start - 1][: region.col]
        tail = lines[region.end - 1]
        newline = "\r\n" if tail.endswith("\r\n") else ("\n" if tail.endswith("\n") else "")
        replaced = [head + placeholder(symbol) + newline]
    else:
        replaced = [region.indent + placeholder(symbol) + region.newline]
    new = "".join(lines[: region.start - 1] + replaced + lines[region.end :])
    new = _checked(new, what, symbol)
    after = [f for f in _walk(parse_python(new)) if f.qualname == symbol]
    if len(after) != 1 or signature(after[0].node) != signature(found.node) or len(_rest(after[0].node)) != 1:
        raise BadRequest(f"deleting the body of {symbol!r} in {what} did not leave its signature intact")
    return new


def delete_function(source: str, symbol: str, what: str = "the file") -> str:
    """``source`` without ``symbol``'s definition (decorators and body included)."""
    lines, found = _find(source, symbol, what)
    node = found.node
    if isinstance(found.parent, ast.ClassDef) and len(found.parent.body) == 1:
        raise BadRequest(
            f"{symbol!r} is the only member of class {found.parent.name} in {what}: removing it would leave an empty "
            "class; delete its body instead"
        )
    region = _region(lines, node)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    new = "".join(lines[: start - 1] + lines[region.end :])
    new = _checked(new, what, symbol)
    if any(f.qualname == symbol for f in _walk(parse_python(new))):
        raise BadRequest(f"{symbol!r} is still defined in {what} after its removal")
    return new


def delete(source: str, symbol: str, deletion: Deletion, what: str = "the file") -> str:
    if deletion == "body":
        return delete_body(source, symbol, what)
    if deletion == "function":
        return delete_function(source, symbol, what)
    raise BadRequest(f"unknown deletion {deletion!r}: 'body' (Commit0-style) or 'function' (the whole definition)")


def plant_canary(source: str, symbol: str, canary: str, what: str = "the file") -> str:
    """``source`` with a ``# CANARY`` comment inside ``symbol``'s body, where :func:`delete_body` removes it; the
    program is unchanged (same AST)."""
    if "\n" in canary or "\r" in canary:
        raise BadRequest("a canary is one line of text")
    lines, found = _find(source, symbol, what)
    region = _region(lines, found.node)
    if region.inline:
        last = lines[region.end - 1]
        body, newline = (
            (last[:-2], "\r\n") if last.endswith("\r\n") else (last.rstrip("\n"), last[len(last.rstrip("\n")) :])
        )
        lines[region.end - 1] = f"{body}  # {canary}{newline}"
    else:
        first = _rest(found.node)[0]
        lines.insert(first.lineno - 1, f"{region.indent}# {canary}{region.newline}")
    new = "".join(lines)
    if ast.dump(_parse(new, what)) != ast.dump(parse_python(source)):
        raise BadRequest(f"planting a canary in {symbol!r} in {what} changed the program")
    return new
