"""Deleting a feature from source text (no processes): bodies replaced, definitions removed, canaries planted."""

from __future__ import annotations

import ast
import textwrap

import pytest

from labbot.common.errors import BadRequest
from labbot.evals.generation.delete import delete, delete_body, delete_function, placeholder, plant_canary, symbols

SOURCE = textwrap.dedent(
    '''\
    """A module."""
    import functools


    def area(width: int, height: int = 2) -> int:
        """Width times height."""
        # multiply them
        result = width * height
        return result  # the area
        # trailing note about the algorithm


    @functools.lru_cache(maxsize=None)
    def cached(x):
        return x + 1


    async def fetch(url, *, retries=3):
        for _ in range(retries):
            return url.upper()


    def short(x): return x * 2


    def doc_then_inline(): "Doc."; return 42


    class Shape:
        """A shape."""

        sides = 0

        def __init__(self, sides):
            self.sides = sides

        @property
        def name(self):
            """Its name."""
            return f"{self.sides}-gon"

        class Inner:
            def deep(self, n):
                total = 0
                for i in range(n):
                    total += i
                return total

            LIMIT = 3

        def todo(self):
            raise NotImplementedError

        def placeholder(self):
            """Only a docstring."""


    class Lonely:
        def only(self):
            return 1


    def after():
        return "é" + "x"
    '''
)


def body_of(source: str, qualname: str) -> list[ast.stmt]:
    for sym in ast.walk(ast.parse(source)):
        if isinstance(sym, ast.FunctionDef | ast.AsyncFunctionDef) and sym.name == qualname.split(".")[-1]:
            return sym.body
    raise AssertionError(qualname)


def test_symbols_lists_functions_methods_and_nested_class_methods():
    found = {s.qualname: s for s in symbols(SOURCE)}
    assert list(found) == [
        "area", "cached", "fetch", "short", "doc_then_inline", "Shape.__init__", "Shape.name", "Shape.Inner.deep",
        "Shape.todo", "Shape.placeholder", "Lonely.only", "after",
    ]  # fmt: skip
    assert found["area"].signature == "def area(width: int, height: int=2) -> int"
    assert found["area"].docstring == "Width times height."
    assert found["area"].body_lines == {8, 9}
    assert found["fetch"].signature.startswith("async def fetch(url, *, retries=3)")
    assert found["cached"].decorators == ("functools.lru_cache(maxsize=None)",)
    assert found["cached"].first_line == found["cached"].lineno - 1
    assert not found["Shape.todo"].deletable and not found["Shape.placeholder"].deletable
    assert found["Shape.Inner.deep"].statements == 4


@pytest.mark.parametrize(
    "symbol", ["area", "cached", "fetch", "short", "doc_then_inline", "Shape.name", "Shape.Inner.deep", "after"]
)
def test_delete_body_keeps_signature_docstring_and_decorators(symbol):
    new = delete_body(SOURCE, symbol)
    before = {s.qualname: s for s in symbols(SOURCE)}[symbol]
    after = {s.qualname: s for s in symbols(new)}[symbol]
    assert (after.signature, after.docstring, after.decorators) == (
        before.signature,
        before.docstring,
        before.decorators,
    )
    body = body_of(new, symbol)
    assert ast.dump(body[-1]) == ast.dump(ast.parse(placeholder(symbol)).body[0])
    # everything else in the file is untouched
    others = [s.qualname for s in symbols(SOURCE) if s.qualname != symbol]
    assert [s.qualname for s in symbols(new) if s.qualname != symbol] == others


def test_delete_body_removes_comments_inside_the_body():
    new = delete_body(SOURCE, "area")
    assert "multiply them" not in new and "the area" not in new and "trailing note" not in new
    assert "width * height" not in new
    assert '    """Width times height."""\n    raise NotImplementedError("restore area")\n' in new


def test_one_line_bodies_are_replaced_on_their_line():
    assert 'def short(x): raise NotImplementedError("restore short")\n' in delete_body(SOURCE, "short")
    new = delete_body(SOURCE, "doc_then_inline")
    assert 'def doc_then_inline(): "Doc."; raise NotImplementedError("restore doc_then_inline")\n' in new


def test_delete_function_removes_the_definition_and_its_decorators():
    new = delete_function(SOURCE, "cached")
    assert "lru_cache" not in new and "def cached" not in new
    new = delete_function(SOURCE, "Shape.name")
    assert "@property" not in new and "-gon" not in new and "def deep" in new
    new = delete_function(SOURCE, "Shape.Inner.deep")
    assert "total" not in new
    assert delete(SOURCE, "short", "function") == delete_function(SOURCE, "short")


@pytest.mark.parametrize(
    ("symbol", "deletion", "message"),
    [
        ("missing", "body", "has no function or method 'missing'"),
        ("Shape.todo", "body", "no body to delete"),
        ("Shape.placeholder", "function", "no body to delete"),
        ("Lonely.only", "function", "only member of class Lonely"),
        ("area", "lines", "unknown deletion"),
    ],
)
def test_refusals(symbol, deletion, message):
    with pytest.raises(BadRequest, match=message):
        delete(SOURCE, symbol, deletion)


def test_a_symbol_defined_twice_is_refused():
    source = textwrap.dedent(
        """\
        class C:
            @property
            def x(self):
                return self._x

            @x.setter
            def x(self, value):
                self._x = value
        """
    )
    assert all(s.ambiguous for s in symbols(source))
    with pytest.raises(BadRequest, match="defined 2 times"):
        delete_body(source, "C.x")


def test_a_file_that_does_not_parse_is_refused():
    with pytest.raises(BadRequest, match="not valid Python"):
        delete_body("def f(:\n", "f")


@pytest.mark.parametrize("symbol", ["area", "cached", "fetch", "short", "doc_then_inline", "Shape.Inner.deep", "after"])
def test_the_canary_is_inside_what_is_deleted(symbol):
    canary = "labbot-canary-0123456789abcdef"
    planted = plant_canary(SOURCE, symbol, canary)
    assert planted.count(canary) == 1
    assert ast.dump(ast.parse(planted)) == ast.dump(ast.parse(SOURCE))
    # deleting the body from the planted original removes the canary and gives the same task text
    assert canary not in delete_body(planted, symbol)
    assert delete_body(planted, symbol) == delete_body(SOURCE, symbol)
    assert canary not in delete_function(planted, symbol)


def test_crlf_and_form_feeds_keep_their_lines():
    source = "def f(x):\r\n    y = x + 1\r\n    return y\r\n\x0c\r\ndef g():\r\n    return 2\r\n"
    new = delete_body(source, "f")
    assert new == 'def f(x):\r\n    raise NotImplementedError("restore f")\r\n\x0c\r\ndef g():\r\n    return 2\r\n'
    assert "restore g" in delete_body(source, "g")
    planted = plant_canary(source, "g", "canary-x")
    assert "    # canary-x\r\n    return 2" in planted


def test_a_file_without_a_final_newline():
    new = delete_body("def f():\n    return 1", "f")
    assert new == 'def f():\n    raise NotImplementedError("restore f")\n'
    assert plant_canary("def f(): return 1", "f", "c") == "def f(): return 1  # c"
