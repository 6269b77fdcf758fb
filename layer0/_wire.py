"""Wire primitives shared by every layer0 module.

These encode the conventions of the Rust layer0 crate's serde output (see
``layer0/README.md``): Decimal as a plain string keeping its scale, durations
as integer milliseconds, free JSON with sorted keys, and externally tagged
enums.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    PlainSerializer,
    Strict,
    WithJsonSchema,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1
U16_MAX = 2**16 - 1

#: Largest magnitude a Rust ``rust_decimal::Decimal`` can hold (96-bit mantissa).
DECIMAL_MAX = Decimal(2**96 - 1)
DECIMAL_MAX_SCALE = 28


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted_json(v) for v in value]
    return value


#: The deepest a free JSON value may nest. serde_json refuses documents deeper than 128
#: levels, so a value this deep still fits inside the message that carries it.
JSON_MAX_DEPTH = 100


def _walk(value: Any) -> Iterator[tuple[Any, int]]:
    """Every value inside ``value`` (itself included) with its level, the outermost at 1
    (iterative: any depth is safe)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        yield item, level
        if isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (0 for a scalar)."""
    return max((level for item, level in _walk(value) if isinstance(item, dict | list)), default=0)


def _checked_json(value: JsonValue) -> JsonValue:
    """``value`` if serde_json could write and read it back: no NaN or infinity (JSON has
    none) and at most :data:`JSON_MAX_DEPTH` levels of nesting."""
    for item, level in _walk(value):
        if isinstance(item, dict | list) and level > JSON_MAX_DEPTH:
            raise ValueError(f"JSON nested deeper than {JSON_MAX_DEPTH} levels")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{item} is not a JSON number")
    return value


#: Arbitrary JSON (``serde_json::Value``). Object keys are written sorted, as
#: serde_json does without ``preserve_order``.
Json = Annotated[JsonValue, AfterValidator(_checked_json), PlainSerializer(_sorted_json)]

#: An unsigned 64-bit integer; floats, strings and booleans are rejected.
U64 = Annotated[int, Strict(), Field(ge=0, le=U64_MAX)]
#: An unsigned 32-bit integer.
U32 = Annotated[int, Strict(), Field(ge=0, le=U32_MAX)]
#: An unsigned 16-bit integer (ports).
U16 = Annotated[int, Strict(), Field(ge=0, le=U16_MAX)]

#: A duration in whole milliseconds, written as a bare unsigned integer.
DurationMs = U64


def decimal_to_str(value: Decimal) -> str:
    """Write a Decimal as plain text with its scale and no exponent (``"1.50"``)."""
    return format(value, "f")


def _parse_decimal(value: Any) -> Decimal:
    if isinstance(value, (bool, int | float)):
        raise ValueError('a Decimal must be given as a string (e.g. "0.0123"), not a JSON number')
    if isinstance(value, Decimal):
        dec = value
    elif isinstance(value, str):
        try:
            dec = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(f"invalid decimal string {value!r}") from None
    else:
        raise ValueError(f"expected a decimal string, got {type(value).__name__}")
    if not dec.is_finite():
        raise ValueError("a Decimal must be finite")
    exponent = dec.as_tuple().exponent
    assert isinstance(exponent, int)
    if -exponent > DECIMAL_MAX_SCALE:
        raise ValueError(f"decimal scale exceeds {DECIMAL_MAX_SCALE} digits")
    if exponent > 0:
        # Normalise positive exponents (1E+2) to a plain integer.
        dec = dec.quantize(Decimal(1))
    if dec.copy_abs().compare_total(DECIMAL_MAX) > 0:
        raise ValueError("decimal out of range (exceeds 79228162514264337593543950335)")
    return dec


#: A fixed-point decimal (``rust_decimal``): cost and budget amounts. Never float.
Money = Annotated[
    Decimal,
    BeforeValidator(_parse_decimal),
    PlainSerializer(decimal_to_str),
    WithJsonSchema(
        {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$", "description": "A decimal as text."}
    ),
]


class WireModel(BaseModel):
    """Base of every layer0 wire struct: frozen, unknown keys ignored (as serde does)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


def _variant_schema(name: str, spec: str | dict[str, str] | None, fields: dict[str, Any]) -> JsonSchemaValue:
    """One variant of an externally tagged enum: its bare name, or an object keyed by it."""
    if spec is None:
        return {"const": name}
    if isinstance(spec, str):
        payload = fields[spec]
    else:
        properties = {wire: fields[attr] for wire, attr in spec.items()}
        payload = {"type": "object", "properties": properties, "required": list(spec)}
    return {
        "type": "object",
        "properties": {name: payload},
        "required": [name],
        "additionalProperties": False,
    }


class ExternallyTagged(BaseModel):
    """Base of serde's externally tagged enums (``"unit"`` / ``{"variant": payload}``).

    Subclasses declare ``_variants``: for each variant name either ``None`` (unit
    variant), a ``str`` (newtype variant: the attribute holding the payload) or a
    ``dict`` mapping wire field names to attributes (struct variant). Instances are
    built with the subclass's classmethod constructors; the wire form is the only
    accepted validation input, so a value validates exactly as Rust's serde does.
    """

    model_config = ConfigDict(frozen=True)
    _variants: ClassVar[dict[str, str | dict[str, str] | None]] = {}

    kind: str

    @classmethod
    def _make(cls, kind: str, payload: Any = None) -> Self:
        spec = cls._variants[kind]
        wire: Any = kind if spec is None else {kind: payload}
        return cls.model_validate(wire)

    @model_validator(mode="before")
    @classmethod
    def _from_wire(cls, data: Any) -> Any:
        if isinstance(data, cls):
            return data
        name = cls.__name__
        expected = ", ".join(f"`{v}`" for v in cls._variants)
        if isinstance(data, str):
            if data not in cls._variants:
                raise ValueError(f"unknown variant `{data}` of {name}, expected one of {expected}")
            if cls._variants[data] is not None:
                raise ValueError(f"`{data}` of {name} carries data and cannot be a bare string")
            return {"kind": data}
        if isinstance(data, dict):
            if len(data) != 1:
                raise ValueError(f"{name} must be a string or an object with exactly one key")
            ((variant, payload),) = data.items()
            if variant not in cls._variants:
                raise ValueError(f"unknown variant `{variant}` of {name}, expected one of {expected}")
            spec = cls._variants[variant]
            if spec is None:
                if payload is not None:
                    raise ValueError(f"unit variant `{variant}` of {name} takes no data")
                return {"kind": variant}
            if isinstance(spec, str):
                if payload is None:
                    raise ValueError(f"variant `{variant}` of {name} needs a value")
                return {"kind": variant, spec: payload}
            if not isinstance(payload, dict):
                raise ValueError(f"variant `{variant}` of {name} needs an object")
            fields: dict[str, Any] = {"kind": variant}
            for wire_name, attr in spec.items():
                if payload.get(wire_name) is None:
                    raise ValueError(f"missing field `{wire_name}` in `{variant}` of {name}")
                fields[attr] = payload[wire_name]
            return fields
        raise ValueError(f"invalid type for {name}: {type(data).__name__}")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The wire form's schema (a unit variant's name, or ``{"variant": payload}``), not the
        attributes the model keeps internally."""
        reference = handler(core_schema)
        model = handler.resolve_ref_schema(reference)
        fields = model.get("properties", {})
        variants = [_variant_schema(name, spec, fields) for name, spec in cls._variants.items()]
        wire = {"title": model.get("title", cls.__name__), "oneOf": variants}
        if "description" in model:
            wire["description"] = model["description"]
        model.clear()
        model.update(wire)
        return reference

    @model_serializer(mode="plain")
    def _to_wire(self) -> Any:
        spec = self._variants[self.kind]
        if spec is None:
            return self.kind
        if isinstance(spec, str):
            return {self.kind: _plain(getattr(self, spec))}
        return {self.kind: {wire: _plain(getattr(self, attr)) for wire, attr in spec.items()}}

    def __str__(self) -> str:
        spec = self._variants[self.kind]
        if spec is None:
            return self.kind
        if isinstance(spec, str):
            return f"{self.kind}({_plain(getattr(self, spec))})"
        inner = ", ".join(f"{w}={_plain(getattr(self, a))}" for w, a in spec.items())
        return f"{self.kind}({inner})"


def _plain(value: Any) -> Any:
    """Serialize a payload value of an externally tagged enum to its wire form."""
    if isinstance(value, Decimal):
        return decimal_to_str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    return value
