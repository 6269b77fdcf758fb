"""``@tool``: a typed Python function (async or sync) as a ToolDyn, its schema from the signature."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, create_model
from pydantic_core import to_jsonable_python

from airlock.errors import SpecError, ToolError

from ._tool import ToolContext, ToolResult

_ARG_LINE = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, per-argument descriptions) from a Google-style docstring."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    sections = re.split(r"\n(?=\w[\w ]*:\s*\n)", text)
    description = sections[0].strip()
    args: dict[str, str] = {}
    for section in sections[1:]:
        head, _, body = section.partition("\n")
        if head.strip().rstrip(":") not in ("Args", "Arguments", "Parameters"):
            continue
        for line in body.splitlines():
            m = _ARG_LINE.match(line)
            if m:
                args[m.group(1)] = m.group(2).strip()
    return description, args


class FunctionTool:
    """A ToolDyn wrapping a function; its input model is built from the signature.

    A parameter annotated ``ToolContext`` receives the call's context and is not part of
    the schema. Sync functions run in a worker thread (``asyncio.to_thread``). The function
    returns a plain value (made JSON with pydantic) or a :class:`ToolResult` (the result
    plus the custom effects the call declares).
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None):
        self._fn = fn
        self._is_async = inspect.iscoroutinefunction(fn)
        self._name = name or fn.__name__
        doc_description, arg_docs = _parse_docstring(fn.__doc__)
        self._description = description if description is not None else doc_description
        hints = _type_hints(fn)
        fields: dict[str, Any] = {}
        self._ctx_param: str | None = None
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise SpecError(f"tool {self._name!r}: *args/**kwargs cannot be described by a schema")
            annotation = hints.get(param.name, Any)
            if annotation is ToolContext:
                self._ctx_param = param.name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, Field(default, description=arg_docs.get(param.name)))
        self._model: type[BaseModel] = create_model(
            f"{self._name}_input", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = self._model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        self._schema: dict[str, Any] = schema

    @property
    def name(self) -> str:
        """The tool's name (the function's, unless given)."""
        return self._name

    @property
    def description(self) -> str:
        """The docstring's summary (unless given)."""
        return self._description

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema derived from the signature."""
        return self._schema

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue | ToolResult:
        """Validate ``input`` against the signature and call the function.

        Raises:
            ToolError: ``invalid_input`` when the arguments do not fit, or what the function raises.
        """
        try:
            parsed = self._model.model_validate(input if input is not None else {})
        except ValidationError as e:
            details = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in e.errors()
            )
            raise ToolError.invalid_input(f"{self._name}: {details}") from e
        kwargs = {field: getattr(parsed, field) for field in type(parsed).model_fields}
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        if self._is_async:
            result = await self._fn(**kwargs)
        else:
            result = await asyncio.to_thread(self._fn, **kwargs)
        if isinstance(result, ToolResult):
            return result
        return to_jsonable_python(result)  # type: ignore[no-any-return]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly."""
        return self._fn(*args, **kwargs)


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise SpecError(f"tool {fn.__name__!r}: cannot resolve its type hints: {e}") from e


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function into a tool: ``@tool`` or ``@tool(name=..., description=...)``.

    The JSON schema comes from the parameters' annotations (via pydantic); the description
    from the docstring's first paragraph, and per-argument descriptions from its ``Args:``.

    Raises:
        SpecError: the signature cannot be described (``*args``, unresolvable hints).
    """
    if fn is not None:
        return FunctionTool(fn)

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, name=name, description=description)

    return wrap
