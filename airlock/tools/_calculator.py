"""``calculator``: evaluates arithmetic safely (an ``ast`` walk over a whitelist; no ``eval``)."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field, JsonValue

from airlock.errors import ToolError, shorten
from airlock.turn import ToolContext

from ._base import SandboxTool, ToolInput, ToolOptions

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
#: ``round``'s digits are clamped to this: beyond it no result changes (an int within
#: :data:`_MAX_BITS` has fewer than 1234 digits, a float's exponent stays within ±324).
_ROUND_DIGITS = 1300


def _round(value: Number, ndigits: Any = None) -> Number:
    # int.__round__ computes 10 ** -ndigits: round(5, -10**9) would run for hours.
    if isinstance(ndigits, int) and not isinstance(ndigits, bool):
        ndigits = max(-_ROUND_DIGITS, min(_ROUND_DIGITS, ndigits))
    return round(value) if ndigits is None else round(value, ndigits)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": math.factorial,
}
_CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e, "tau": math.tau}
#: Largest integer result, in bits (keeps ``9**9**9`` from eating the sandbox's CPU).
_MAX_BITS = 4096
_MAX_EXPRESSION = 1000
#: Deepest nesting evaluated: the walk recurses once per level, and ``-`` repeated 999 times
#: would exhaust Python's stack (RecursionError). A sum of 500 terms is 500 levels deep.
_MAX_DEPTH = 500


class CalculatorInput(ToolInput):
    expression: str = Field(
        min_length=1,
        max_length=_MAX_EXPRESSION,
        description="Arithmetic: + - * / // % ** ( ), numbers, pi, e, and sqrt, log, sin, cos, … .",
    )


class CalculatorOptions(ToolOptions):
    pass


def _check(value: Any) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError.invalid_input(f"not a number: {value!r}")
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise ToolError.execution_failed(f"result too large (more than {_MAX_BITS} bits)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError.execution_failed("result is not finite")
    return value


def _pow(base: Number, exp: Number) -> Number:
    if (
        isinstance(base, int)
        and isinstance(exp, int)
        and abs(base) > 1
        and exp > 0
        and base.bit_length() * exp > _MAX_BITS * 2
    ):
        raise ToolError.execution_failed(f"result too large (more than {_MAX_BITS} bits)")
    result = base**exp
    if isinstance(result, complex):
        raise ToolError.execution_failed("result is complex")
    return result


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression.

    Raises:
        ToolError: ``invalid_input`` for syntax or anything outside the whitelist;
            ``execution_failed`` for math errors (division by zero, domain, overflow).
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ToolError.invalid_input(f"invalid expression: {e.msg}") from e
    except (RecursionError, MemoryError) as e:  # the parser's own nesting limits
        raise ToolError.invalid_input("expression nested too deeply") from e

    def walk(node: ast.AST, depth: int = 0) -> Number:
        if depth > _MAX_DEPTH:
            raise ToolError.invalid_input(f"expression nested more than {_MAX_DEPTH} levels deep")
        depth += 1
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)
        ):
            return _check(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left, depth), walk(node.right, depth)
            if isinstance(node.op, ast.Pow):
                return _check(_pow(left, right))
            return _check(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _check(_UNARY[type(node.op)](walk(node.operand, depth)))
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            args = [walk(a, depth) for a in node.args]
            if node.func.id == "factorial" and (
                len(args) != 1 or not isinstance(args[0], int) or args[0] > 1000
            ):
                raise ToolError.invalid_input("factorial takes one integer up to 1000")
            return _check(_FUNCTIONS[node.func.id](*args))
        try:
            element = shorten(repr(ast.unparse(node)), 200)
        except RecursionError:  # ``not`` nested hundreds of times
            element = type(node).__name__
        raise ToolError.invalid_input(f"unsupported element in expression: {element}")

    try:
        return walk(tree.body)
    except ZeroDivisionError as e:
        raise ToolError.execution_failed("division by zero") from e
    except RecursionError as e:  # a caller already deep in its stack
        raise ToolError.invalid_input("expression nested too deeply") from e
    except (ValueError, OverflowError, TypeError) as e:
        raise ToolError.execution_failed(f"math error: {e}") from e


class CalculatorTool(SandboxTool[CalculatorInput, CalculatorOptions]):
    """Evaluates an arithmetic expression; returns the result as text."""

    name = "calculator"
    description = (
        "Evaluate an arithmetic expression (e.g. '2 * (3 + 4) ** 2', 'sqrt(2)') and return the result."
    )
    input_model: ClassVar[type[ToolInput]] = CalculatorInput
    options_model: ClassVar[type[ToolOptions]] = CalculatorOptions

    async def run(self, input: CalculatorInput, ctx: ToolContext) -> JsonValue:
        """Return the value as text (``"14"``, ``"1.4142135623730951"``)."""
        return repr(evaluate(input.expression))
