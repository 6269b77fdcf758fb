"""Why a message cannot be read: problems a client in any language can act on.

A :class:`MalformedMessage` holds one :class:`Problem` per thing that is wrong, each with the
path of the field it is about (``agent.provider.kind``, ``input.message.blocks[0]``). Its text
is one line per problem, ``path: what is wrong``: no pydantic URLs, no Python class names.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pydantic import ValidationError

from airlock.errors import RunnerError

#: pydantic error types whose message names a Python class ("… or instance of ContextSpec").
_OBJECT_TYPES = frozenset(("model_type", "model_attributes_type", "dataclass_type", "dataclass_exact_type"))
#: Prefixes pydantic puts before a validator's own message.
_PREFIXES = ("Value error, ", "Assertion failed, ")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a message: the field's path (empty: the message itself) and why."""

    path: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}: {self.text}" if self.path else self.text

    def under(self, prefix: str) -> Problem:
        """The same problem seen from the message that holds this one at ``prefix``."""
        if not prefix:
            return self
        if not self.path:
            return Problem(prefix, self.text)
        return Problem(prefix + ("" if self.path.startswith("[") else ".") + self.path, self.text)


class MalformedMessage(RunnerError):
    """Raised when a protobuf message cannot be read as the layer0/airlock value it carries
    (a required field or ``oneof`` is missing, JSON text is invalid, an enum value is
    unspecified or unknown, a value does not validate).

    ``problems`` lists what is wrong; ``str()`` is one line per problem.
    """

    def __init__(self, text: str = "", *, path: str = "", problems: Sequence[Problem] = ()) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems) or (Problem(path, text),)
        super().__init__("\n".join(str(p) for p in self.problems))

    def under(self, prefix: str) -> MalformedMessage:
        """The same problems, their paths seen from the message holding this one at ``prefix``."""
        return MalformedMessage(problems=[p.under(prefix) for p in self.problems])


@contextmanager
def located(path: str) -> Iterator[None]:
    """Prefix the paths of a MalformedMessage raised inside with ``path`` (a pydantic
    ValidationError raised inside becomes a MalformedMessage located there too)."""
    try:
        yield
    except MalformedMessage as e:
        raise e.under(path) from e
    except ValidationError as e:
        raise MalformedMessage(problems=validation_problems(e)).under(path) from e


def _path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _text(error: dict[str, object]) -> str:
    if error["type"] in _OBJECT_TYPES:
        return "Input should be an object"
    text = str(error["msg"])
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def validation_problems(error: ValidationError) -> list[Problem]:
    """One problem per pydantic error, located by the error's path, without URL or class names."""
    return [Problem(_path(e["loc"]), _text(dict(e))) for e in error.errors(include_url=False)]


def problems_of(error: Exception) -> list[Problem]:
    """The problems an error describes, one per line of its eventual answer.

    A MalformedMessage gives its own. An error raised from a pydantic ValidationError (e.g.
    a SpecError "invalid options for tool 'bash': …") gives one problem per validation error,
    each led by the error's context (its text up to the first ``": "``). Anything else gives
    one problem per line of its text.
    """
    if isinstance(error, MalformedMessage):
        return list(error.problems)
    cause = error.__cause__
    text = str(error)
    if isinstance(cause, ValidationError):
        context = text.partition(": ")[0]
        return [Problem("", f"{context}: {p}") for p in validation_problems(cause)]
    return [Problem("", line) for line in text.splitlines() if line.strip()] or [Problem("", text)]
