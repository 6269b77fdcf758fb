"""Shared machinery of the sandbox tools: typed input/options models and their schema."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from airlock.errors import SpecError, ToolError, shorten
from airlock.turn import ToolContext


class ToolInput(BaseModel):
    """Base of a tool's input model (unknown keys are an error the model can read)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolOptions(BaseModel):
    """Base of a tool's options (from ``AgentSpec.tool_options``; typos fail loudly)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


InputT = TypeVar("InputT", bound=ToolInput)
OptionsT = TypeVar("OptionsT", bound=ToolOptions)


#: Bytes of an echoed argument (a path, a URL, an unknown key) an error message keeps.
ECHO_BYTES = 200
#: Bytes of a validation error message at most (a 5 MB unknown key must not come back whole).
_MAX_ERRORS_BYTES = 2000


def shown(value: str) -> str:
    """``value`` for an error message: quoted (NUL, newlines and lone surrogates escaped) and
    cut to about :data:`ECHO_BYTES`, so an echoed huge or binary argument stays readable."""
    return shorten(repr(value), ECHO_BYTES)


def _errors(e: ValidationError) -> str:
    # A location can be a key of the input (an unknown field, a header name): cut each part.
    return shorten(
        "; ".join(
            f"{'.'.join(shorten(str(p), ECHO_BYTES) for p in err['loc']) or 'input'}: {err['msg']}"
            for err in e.errors()
        ),
        _MAX_ERRORS_BYTES,
    )


def _lone_surrogate(parsed: BaseModel) -> str | None:
    """The first field of ``parsed`` holding text with a lone surrogate (JSON ``"\\ud800"``
    decodes to one), or None. Such text has no UTF-8 form: no path, command, request or wire
    message can carry it, and encoding it would raise ``UnicodeEncodeError`` deep in a tool."""
    for name, value in parsed:
        texts = [value] if isinstance(value, str) else []
        if isinstance(value, dict):
            texts = [str(t) for item in value.items() for t in item]
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return str(name)
    return None


class SandboxTool(ABC, Generic[InputT, OptionsT]):
    """A ``ToolDyn`` whose input is validated against a pydantic model before ``run``."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: ClassVar[type[ToolInput]]
    options_model: ClassVar[type[ToolOptions]]
    _schema: ClassVar[dict[str, Any] | None] = None

    def __init__(self, options: OptionsT) -> None:
        self.options = options

    @classmethod
    def parse_options(cls, raw: dict[str, Any] | None) -> ToolOptions:
        """The tool's options from their JSON form.

        Raises:
            SpecError: unknown option or invalid value (the message names the tool).
        """
        try:
            return cls.options_model.model_validate(raw or {})
        except ValidationError as e:
            raise SpecError(f"invalid options for tool {cls.name!r}: {_errors(e)}") from e

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the input object."""
        cls = type(self)
        if cls._schema is None:
            schema = cls.input_model.model_json_schema()
            schema.pop("title", None)
            cls._schema = schema
        return cls._schema

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue:
        """Validate ``input`` and run the tool.

        Raises:
            ToolError: ``invalid_input`` when the input does not match the schema or holds
                text with a lone surrogate, or whatever the tool raises.
        """
        try:
            parsed = self.input_model.model_validate(input)
        except ValidationError as e:
            raise ToolError.invalid_input(f"{self.name}: {_errors(e)}") from e
        field = _lone_surrogate(parsed)
        if field is not None:
            raise ToolError.invalid_input(
                f"{self.name}: {field}: text holds a lone surrogate (not valid Unicode)"
            )
        return await self.run(parsed, ctx)  # type: ignore[arg-type]

    @abstractmethod
    async def run(self, input: InputT, ctx: ToolContext) -> JsonValue:
        """Run the tool on validated input."""


def cap_text(data: bytes, limit: int) -> str:
    """``data`` decoded as UTF-8 (invalid bytes replaced), cut to ``limit`` bytes with a
    ``[truncated N bytes]`` marker naming how many bytes were dropped."""
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[truncated {len(data) - limit} bytes]"
