"""load_custom_tools: import paths (``package.module:function``) become tools, or a SpecError
naming the agent, the path and the reason. Each test writes its own package to a temporary
directory on sys.path (a fresh name, so no module is reused between tests)."""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from airlock.errors import SpecError, ToolError
from airlock.tools import load_custom_tools
from airlock.turn import FunctionTool, ToolContext

CTX = ToolContext(tool_use_id="t1", agent="wc")

TOOLS = '''
import asyncio
import threading
from typing import Literal

from pydantic import BaseModel

from airlock.turn import ToolContext, tool


class Span(BaseModel):
    start: int
    end: int


def count_words(text: str, unique: bool = False) -> dict[str, int]:
    """Count the words of a text.

    Args:
        text: the text to count.
        unique: count each word once.
    """
    words = text.split()
    return {"words": len(set(words) if unique else words)}


async def shout(text: str, mode: Literal["upper", "title"] = "upper") -> str:
    """Shout a text."""
    await asyncio.sleep(0)
    return text.upper() if mode == "upper" else text.title()


def where(ctx: ToolContext, spans: list[Span]) -> dict[str, object]:
    """Which thread runs me, and for which call."""
    return {
        "thread": threading.current_thread().name,
        "call": ctx.tool_use_id,
        "total": sum(s.end - s.start for s in spans),
    }


def slow(seconds: float) -> str:
    """Sleep (blocking)."""
    import time

    time.sleep(seconds)
    return "slept"


@tool(name="reverse_text", description="Reverse a text.")
def reverse(text: str) -> str:
    return text[::-1]


class Echo:
    """A hand-written ToolDyn instance."""

    name = "echo"
    description = "Echo the input."
    input_schema = {"type": "object", "properties": {"value": {}}}

    async def call(self, input, ctx):
        return input


echo = Echo()
alias = count_words
'''


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A writer of modules in a fresh package on sys.path: ``pkg("mod", source)`` returns the
    module's dotted name; ``pkg.name`` is the package's."""
    name = f"ctpkg_{uuid.uuid4().hex[:10]}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    class Writer:
        def __init__(self) -> None:
            self.name = name

        def __call__(self, module: str, source: str) -> str:
            (root / f"{module}.py").write_text(textwrap.dedent(source))
            return f"{name}.{module}"

    return Writer()


def refused(paths: list[str], **kwargs: Any) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_custom_tools(paths, agent="wc", **kwargs)
    return str(e.value).splitlines()


# --- tools that load ----------------------------------------------------------------------------


async def test_a_sync_function_becomes_a_tool_with_a_schema_from_its_hints(pkg: Any) -> None:
    mod = pkg("tools", TOOLS)
    [count] = load_custom_tools([f"{mod}:count_words"], agent="wc")
    assert isinstance(count, FunctionTool)
    assert count.name == "count_words"
    assert count.description == "Count the words of a text."
    assert count.input_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string", "description": "the text to count."},
            "unique": {"type": "boolean", "default": False, "description": "count each word once."},
        },
        "required": ["text"],
    }
    assert await count.call({"text": "a b a"}, CTX) == {"words": 3}
    assert await count.call({"text": "a b a", "unique": True}, CTX) == {"words": 2}
    with pytest.raises(ToolError) as e:
        await count.call({"text": 3}, CTX)
    assert e.value.kind == "invalid_input"


async def test_an_async_function_is_awaited_and_literals_become_enums(pkg: Any) -> None:
    mod = pkg("tools", TOOLS)
    [shout] = load_custom_tools([f"{mod}:shout"], agent="wc")
    assert shout.input_schema["properties"]["mode"] == {
        "enum": ["upper", "title"],
        "type": "string",
        "default": "upper",
    }
    assert await shout.call({"text": "hi there"}, CTX) == "HI THERE"
    assert await shout.call({"text": "hi there", "mode": "title"}, CTX) == "Hi There"


async def test_a_sync_function_runs_in_a_worker_thread_not_on_the_event_loop(pkg: Any) -> None:
    mod = pkg("tools", TOOLS)
    where, slow = load_custom_tools([f"{mod}:where", f"{mod}:slow"], agent="wc")
    # The ToolContext parameter is no part of the schema; nested models are.
    assert set(where.input_schema["properties"]) == {"spans"}
    assert "Span" in str(where.input_schema)
    result = await where.call({"spans": [{"start": 1, "end": 4}, {"start": 0, "end": 2}]}, CTX)
    assert result == {"thread": result["thread"], "call": "t1", "total": 5}
    assert result["thread"] != threading.current_thread().name
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    assert await slow.call({"seconds": 0.3}, CTX) == "slept"
    ticker.cancel()
    assert time.monotonic() - started >= 0.3
    assert ticks >= 10, "the event loop was blocked while the sync tool ran"


async def test_an_already_decorated_tool_and_a_tool_instance_are_used_as_they_are(pkg: Any) -> None:
    mod = pkg("tools", TOOLS)
    reverse, echo, alias = load_custom_tools([f"{mod}:reverse", f"{mod}:echo", f"{mod}:alias"], agent="wc")
    assert reverse.name == "reverse_text" and reverse.description == "Reverse a text."
    assert await reverse.call({"text": "abc"}, CTX) == "cba"
    import importlib

    assert echo is importlib.import_module(mod).echo
    assert await echo.call({"value": 7}, CTX) == {"value": 7}
    # A plain function is named after the path's attribute, not its __name__.
    assert alias.name == "alias"


def test_no_paths_no_tools() -> None:
    assert load_custom_tools([], agent="wc") == []


# --- refusals -----------------------------------------------------------------------------------


def test_a_missing_package_is_named_as_missing_from_the_sandbox_image() -> None:
    [line] = refused(["mypkg_not_installed.tools:search"])
    assert line.startswith(
        "agent 'wc': custom tool 'mypkg_not_installed.tools:search': module 'mypkg_not_installed' not found "
        "in the sandbox image"
    )
    assert "airlock images build --name" in line


def test_a_missing_submodule_and_a_missing_dependency(pkg: Any) -> None:
    mod = pkg("needs", "import a_dependency_nobody_installed\n")
    missing, dependency = refused([f"{pkg.name}.nosuch:f", f"{mod}:f"])
    assert missing == (
        f"agent 'wc': custom tool '{pkg.name}.nosuch:f': module '{pkg.name}.nosuch' not found in the sandbox "
        "image (add its package to the image: airlock images build --name IMAGE --requirements FILE / "
        "--wheel FILE)"
    )
    assert dependency.startswith(
        f"agent 'wc': custom tool '{mod}:f': importing module '{mod}' failed: it imports "
        "'a_dependency_nobody_installed', which is not in the sandbox image"
    )


def test_a_module_that_raises_or_exits_at_import(pkg: Any) -> None:
    broken = pkg("broken", "raise RuntimeError('no config file')\n")
    exits = pkg("exits", "import sys\nsys.exit(3)\n")
    syntax = pkg("syntax", "def f(:\n")
    raised, exited, bad = refused([f"{broken}:f", f"{exits}:f", f"{syntax}:f"])
    assert raised == (
        f"agent 'wc': custom tool '{broken}:f': importing module '{broken}' raised RuntimeError: "
        "no config file"
    )
    assert exited == f"agent 'wc': custom tool '{exits}:f': importing module '{exits}' raised SystemExit: 3"
    assert bad.startswith(
        f"agent 'wc': custom tool '{syntax}:f': importing module '{syntax}' raised SyntaxError"
    )


def test_a_module_whose_import_hangs_is_refused_after_the_timeout(pkg: Any) -> None:
    mod = pkg("hangs", "import time\ntime.sleep(5)\ndef f(x: int) -> int:\n    return x\n")
    started = time.monotonic()
    [line] = refused([f"{mod}:f"], import_timeout_s=0.3)
    assert time.monotonic() - started < 2
    assert line == f"agent 'wc': custom tool '{mod}:f': importing module '{mod}' did not finish within 0.3s"


def test_a_missing_attribute(pkg: Any) -> None:
    mod = pkg("tools", TOOLS)
    assert refused([f"{mod}:search"]) == [
        f"agent 'wc': custom tool '{mod}:search': module '{mod}' has no attribute 'search'"
    ]


def test_objects_that_are_not_functions(pkg: Any) -> None:
    mod = pkg(
        "things",
        """
        import functools

        LIMIT = 3
        class Searcher:
            def __call__(self, q: str) -> str:
                return q
        searcher = Searcher()
        def gen(n: int):
            yield n
        async def agen(n: int):
            yield n
        def plus(a: int, b: int) -> int:
            return a + b
        plus_one = functools.partial(plus, 1)
        """,
    )
    lines = refused([f"{mod}:{a}" for a in ("LIMIT", "Searcher", "searcher", "gen", "agen", "plus_one")])
    assert lines == [
        f"agent 'wc': custom tool '{mod}:LIMIT': 'LIMIT' is an object of type int, not a function or a tool",
        f"agent 'wc': custom tool '{mod}:Searcher': 'Searcher' is a class, not a function or a tool instance",
        f"agent 'wc': custom tool '{mod}:searcher': 'searcher' is a callable object of type {mod}.Searcher, "
        "not a function or a tool",
        f"agent 'wc': custom tool '{mod}:gen': 'gen' is a generator function; a tool returns one result",
        f"agent 'wc': custom tool '{mod}:agen': 'agen' is a generator function; a tool returns one result",
        f"agent 'wc': custom tool '{mod}:plus_one': 'plus_one' is a callable object of type "
        "functools.partial, not a function or a tool",
    ]


def test_signatures_no_schema_describes(pkg: Any) -> None:
    mod = pkg(
        "sigs",
        """
        import socket

        def untyped(query, limit: int = 3) -> str:
            return query
        def star(*terms: str) -> str:
            return ""
        def kwargs(**options: str) -> str:
            return ""
        def positional(query: str, /) -> str:
            return query
        def no_schema(sock: socket.socket) -> str:
            return ""
        def unresolved(query: "NotDefinedAnywhere") -> str:
            return ""
        """,
    )
    names = ("untyped", "star", "kwargs", "positional", "no_schema", "unresolved")
    lines = refused([f"{mod}:{n}" for n in names])
    prefix = [f"agent 'wc': custom tool '{mod}:{n}': " for n in names]
    assert lines[0] == prefix[0] + (
        "parameter 'query' has no type annotation (the input schema is made of the annotations)"
    )
    assert lines[1] == prefix[1] + "parameter *terms: a tool's input is an object, *args has no schema"
    assert lines[2] == prefix[2] + "parameter **options: a tool's input is an object, **kwargs has no schema"
    assert lines[3] == prefix[3] + "parameter 'query' is positional-only; a tool is called by keyword"
    assert lines[4].startswith(prefix[4] + "parameter 'sock': its type socket.socket has no JSON schema (")
    assert lines[5].startswith(prefix[5] + "cannot resolve the type hints of 'unresolved': NameError")


def test_names_that_collide_or_are_invalid(pkg: Any) -> None:
    one = pkg(
        "one",
        """
        from airlock.turn import tool

        def bash(command: str) -> str:
            return command
        @tool(name="calculator")
        def calc(expression: str) -> str:
            return expression
        def search(q: str) -> str:
            return q
        @tool(name="not a name!")
        def odd(q: str) -> str:
            return q
        """,
    )
    two = pkg("two", "def search(q: str) -> str:\n    return q\n")
    lines = refused([f"{one}:bash", f"{one}:calc", f"{one}:search", f"{two}:search", f"{one}:odd"])
    assert lines == [
        f"agent 'wc': custom tool '{one}:bash': its name 'bash' is a built-in tool's; give it another "
        "(e.g. @tool(name=...))",
        f"agent 'wc': custom tool '{one}:calc': its name 'calculator' is a built-in tool's; give it another "
        "(e.g. @tool(name=...))",
        f"agent 'wc': custom tool '{two}:search': its name 'search' is also the name of custom tool "
        f"'{one}:search'",
        f"agent 'wc': custom tool '{one}:odd': its name 'not a name!' is not a valid tool name "
        "(1-64 letters, digits, '_' or '-')",
    ]


def test_tool_instances_that_break_the_contract(pkg: Any) -> None:
    mod = pkg(
        "bad_tools",
        """
        class SyncCall:
            name = "sync_call"
            description = ""
            input_schema = {"type": "object"}
            def call(self, input, ctx):
                return input
        class ListSchema:
            name = "list_schema"
            description = ""
            input_schema = {"type": "array"}
            async def call(self, input, ctx):
                return input
        class Raises:
            description = ""
            input_schema = {"type": "object"}
            @property
            def name(self):
                raise KeyError("name")
            async def call(self, input, ctx):
                return input
        sync_call, list_schema, raises = SyncCall(), ListSchema(), Raises()
        """,
    )
    lines = refused([f"{mod}:sync_call", f"{mod}:list_schema", f"{mod}:raises"])
    assert lines == [
        f"agent 'wc': custom tool '{mod}:sync_call': tool 'sync_call': its call method is not async",
        f"agent 'wc': custom tool '{mod}:list_schema': tool 'list_schema': its input schema is not a JSON "
        "schema of type object",
        f"agent 'wc': custom tool '{mod}:raises': reading the tool's name, description or schema raised "
        "KeyError: 'name'",
    ]


def test_every_bad_path_is_reported_at_once_and_a_malformed_one_too(pkg: Any) -> None:
    mod = pkg("tools", TOOLS)
    lines = refused([f"{mod}:count_words", "not an import path", f"{mod}:missing", "absent_pkg_xyz.m:f"])
    assert [line.split(": ", 2)[1] for line in lines] == [
        "custom tool 'not an import path'",
        f"custom tool '{mod}:missing'",
        "custom tool 'absent_pkg_xyz.m:f'",
    ]
    assert lines[0].endswith("not an import path of the form package.module:function")
