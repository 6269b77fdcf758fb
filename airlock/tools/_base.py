"""Shared machinery of the sandbox tools: typed input/options models and their schema."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from airlock.errors import SpecError, ToolError
from airlock.turn import ToolContext


class ToolInput(BaseModel):
    """Base of a tool's input model (unknown keys are an error the model can read)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolOptions(BaseModel):
    """Base of a tool's options (from ``AgentSpec.tool_options``; typos fail loudly)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


InputT = TypeVar("InputT", bound=ToolInput)
OptionsT = TypeVar("OptionsT", bound=ToolOptions)


def _errors(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in e.errors())


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
            ToolError: ``invalid_input`` when the input does not match the schema, or
                whatever the tool raises.
        """
        try:
            parsed = self.input_model.model_validate(input)
        except ValidationError as e:
            raise ToolError.invalid_input(f"{self.name}: {_errors(e)}") from e
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
