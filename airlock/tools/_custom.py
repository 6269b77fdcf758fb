"""Custom tools named by import path (``package.module:function``), imported where the turn runs.

An AgentSpec may list, beside the built-in tools, tools of the user's own Python packages:
``wordcount.tools:count_words``. The runner imports them from the sandbox's image when it
builds the turn, so a path that does not import fails the job at provisioning, before any
model call, with a :class:`~airlock.errors.SpecError` naming the agent, the path and why.

What a path may name:

* a typed function, sync or async: it becomes a :class:`~airlock.turn.FunctionTool` named
  after the path's attribute, its input schema from the annotations and its description
  from the docstring (a sync function runs in a worker thread, never on the event loop);
* an object that already is a tool (``@tool``-decorated, or any ``ToolDyn`` instance): used
  as it is, once its name, schema and ``call`` are checked.

Every parameter but a ``ToolContext`` one needs an annotation whose type has a JSON schema;
``*args``/``**kwargs`` and positional-only parameters have no place in a tool's input object.
"""

from __future__ import annotations

import importlib
import inspect
import re
import threading
import typing
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import PydanticUserError, TypeAdapter

from airlock.errors import SpecError, shorten
from airlock.spec import IMPORT_PATH, TOOL_NAMES
from airlock.turn import FunctionTool, ToolContext, ToolDyn

__all__ = ["IMPORT_TIMEOUT_S", "TOOL_NAME", "load_custom_tools"]

#: Seconds one module's import may take (its top-level code runs); past it the path is refused.
IMPORT_TIMEOUT_S = 30.0
#: What a model API accepts as a tool's name (Anthropic's and OpenAI's common rule).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Where the message tells the user to put a missing package.
_INSTALL_HINT = (
    "add its package to the image: airlock images build --name IMAGE --requirements FILE / --wheel FILE"
)


class _Refused(Exception):
    """Why one import path cannot be a tool (the caller adds the agent and the path)."""


def load_custom_tools(
    paths: Sequence[str], *, agent: str, import_timeout_s: float = IMPORT_TIMEOUT_S
) -> list[ToolDyn]:
    """The tools ``paths`` name (``package.module:function``), in order.

    Args:
        paths: import paths (``AgentSpec.custom_tools``).
        agent: the agent's name, for the messages.
        import_timeout_s: seconds each module's import may take.

    Raises:
        SpecError: one line per path that is malformed, does not import (module or attribute
            missing, the import fails or takes too long), names neither a function nor a
            tool, has a signature no JSON schema describes, or gives a name that is a
            built-in tool's, another custom tool's, or not a valid tool name. Each line reads
            ``agent 'A': custom tool 'P': why``.
    """
    tools: list[ToolDyn] = []
    problems: list[str] = []
    owners: dict[str, str] = {}
    for path in paths:
        try:
            found = _load(path, import_timeout_s)
            _check_name(found.name, owners)
        except _Refused as e:
            problems.append(f"agent {agent!r}: custom tool {shorten(path, 200)!r}: {e}")
            continue
        owners[found.name] = path
        tools.append(found)
    if problems:
        raise SpecError("\n".join(problems))
    return tools


def _load(path: str, timeout: float) -> ToolDyn:
    if not IMPORT_PATH.match(path):
        raise _Refused("not an import path of the form package.module:function")
    module_name, _, attribute = path.partition(":")
    module = _import(module_name, timeout)
    try:
        target = getattr(module, attribute)
    except AttributeError:
        raise _Refused(f"module {module_name!r} has no attribute {attribute!r}") from None
    except Exception as e:  # a module __getattr__ of the user's may raise anything
        raise _Refused(f"reading {attribute!r} of module {module_name!r} raised {_describe(e)}") from e
    if inspect.isclass(target):
        raise _Refused(f"{attribute!r} is a class, not a function or a tool instance")
    try:
        is_tool = isinstance(target, ToolDyn)  # reads the object's attributes
    except Exception as e:
        raise _Refused(f"reading the tool's name, description or schema raised {_describe(e)}") from e
    if is_tool:
        return _checked_tool(target)
    if inspect.isfunction(target) or inspect.ismethod(target):
        return _function_tool(target, attribute)
    kind = "a callable object" if callable(target) else "an object"
    raise _Refused(f"{attribute!r} is {kind} of type {_type_name(type(target))}, not a function or a tool")


def _import(name: str, timeout: float) -> Any:
    """Import ``name`` in a daemon thread, waiting at most ``timeout`` seconds for it (a
    module whose top-level code hangs is refused, never waited on)."""
    result: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(importlib.import_module(name))
        except BaseException as e:  # SystemExit from a module's top level too
            failure.append(e)

    thread = threading.Thread(target=run, name=f"import {name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise _Refused(f"importing module {name!r} did not finish within {timeout:g}s")
    if result:
        return result[0]
    error = failure[0]
    if isinstance(error, ModuleNotFoundError) and error.name:
        if name == error.name or name.startswith(error.name + "."):
            raise _Refused(f"module {error.name!r} not found in the sandbox image ({_INSTALL_HINT})")
        raise _Refused(
            f"importing module {name!r} failed: it imports {error.name!r}, which is not in the sandbox image "
            f"({_INSTALL_HINT})"
        )
    raise _Refused(f"importing module {name!r} raised {_describe(error)}")


def _describe(error: BaseException) -> str:
    return shorten(f"{type(error).__name__}: {error}", 300)


def _function_tool(fn: Callable[..., Any], name: str) -> ToolDyn:
    """A function as a FunctionTool named ``name``, its signature checked first."""
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise _Refused(f"{name!r} is a generator function; a tool returns one result")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise _Refused(f"cannot resolve the type hints of {name!r}: {_describe(e)}") from e
    for param in inspect.signature(fn).parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise _Refused(f"parameter *{param.name}: a tool's input is an object, *args has no schema")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise _Refused(f"parameter **{param.name}: a tool's input is an object, **kwargs has no schema")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise _Refused(f"parameter {param.name!r} is positional-only; a tool is called by keyword")
        if param.name not in hints:
            raise _Refused(
                f"parameter {param.name!r} has no type annotation (the input schema is made of the "
                "annotations)"
            )
        hint = hints[param.name]
        if hint is ToolContext:
            continue
        try:
            TypeAdapter(hint).json_schema()
        except (PydanticUserError, TypeError, ValueError) as e:
            raise _Refused(
                f"parameter {param.name!r}: its type {_type_name(hint)} has no JSON schema ({_first_line(e)})"
            ) from e
    try:
        return FunctionTool(fn, name=name)
    except SpecError as e:
        raise _Refused(str(e)) from e
    except (PydanticUserError, TypeError, ValueError) as e:
        raise _Refused(f"its signature cannot be described by a JSON schema: {_first_line(e)}") from e


def _checked_tool(found: ToolDyn) -> ToolDyn:
    """A ready tool, once what the turn relies on holds: a name, a description, an object
    schema and an async ``call``."""
    try:
        name, description, schema = found.name, found.description, found.input_schema
    except Exception as e:
        raise _Refused(f"reading the tool's name, description or schema raised {_describe(e)}") from e
    if not isinstance(name, str):
        raise _Refused(f"the tool's name is a {type(name).__name__}, not a string")
    if not isinstance(description, str):
        raise _Refused(f"tool {name!r}: its description is a {type(description).__name__}, not a string")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise _Refused(f"tool {name!r}: its input schema is not a JSON schema of type object")
    if not inspect.iscoroutinefunction(found.call):
        raise _Refused(f"tool {name!r}: its call method is not async")
    return found


def _check_name(name: str, owners: dict[str, str]) -> None:
    if not TOOL_NAME.match(name):
        raise _Refused(
            f"its name {shorten(name, 100)!r} is not a valid tool name (1-64 letters, digits, '_' or '-')"
        )
    if name in TOOL_NAMES:
        raise _Refused(f"its name {name!r} is a built-in tool's; give it another (e.g. @tool(name=...))")
    if name in owners:
        raise _Refused(f"its name {name!r} is also the name of custom tool {owners[name]!r}")


def _type_name(hint: Any) -> str:
    if not isinstance(hint, type):
        return repr(hint)
    return hint.__qualname__ if hint.__module__ == "builtins" else f"{hint.__module__}.{hint.__qualname__}"


def _first_line(error: BaseException) -> str:
    """The error's first sentence (pydantic's messages go on with advice meant for its users)."""
    text = str(error).strip()
    if not text:
        return type(error).__name__
    first = text.splitlines()[0]
    return shorten(first.split(". ")[0].rstrip("."), 200)
