"""Extensions of a turn from the packages of the sandbox image, found by entry point.

A package registers what it adds in its metadata, one entry-point group per kind
(``airlock.spec.EXTENSION_GROUPS``)::

    [project.entry-points."airlock.providers"]
    my-llm = "mypkg.llm:MyProvider"

and an AgentSpec names it (``provider: {kind: custom, name: my-llm, options: {...}}``). What
each entry point loads is a factory, called when the turn is built:

=====================  =========================================================  ==========================
group                  called as                                                  returns
=====================  =========================================================  ==========================
``airlock.providers``  ``factory(spec: ProviderSpec)`` (its ``options`` inside)  a ``Provider``
``airlock.hooks``      ``factory(options: dict)``                                 a ``layer0.Hook``
``airlock.context_``   ``factory(spec: ContextSpec, provider: Provider)``         a ``ContextStrategy``
``strategies``
``airlock.tool_``      ``factory(options: dict)``                                 a ``ToolMiddleware``
``middleware``
``airlock.turns``      ``factory(spec: AgentSpec, parts: CustomTurnParts)``       a ``layer0.Turn``
=====================  =========================================================  ==========================

A name no installed package registers, one registered twice, or an entry point that does not
load fails the build with a :class:`~airlock.errors.SpecError` before the turn starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airlock.errors import SpecError, shorten
from airlock.spec import EXTENSION_GROUPS, AgentSpec

if TYPE_CHECKING:
    from layer0 import StateReader, Turn, TurnInput, TurnOutput

    from ._provider import Provider
    from ._registry import ToolRegistry

__all__ = [
    "LOAD_TIMEOUT_S",
    "CustomTurnParts",
    "ExtensionTurn",
    "ImageTurn",
    "build_extensions",
    "call_extension_factory",
    "check_extensions",
    "load_extension",
    "registered",
]

#: Seconds loading one entry point (importing its module) may take.
LOAD_TIMEOUT_S = 30.0
_HINT = "add a package that registers it to the image: airlock images build --name IMAGE --wheel FILE"


@dataclass(frozen=True)
class CustomTurnParts:
    """What the runner hands a custom turn's factory: the parts the spec describes, built."""

    provider: Provider
    #: The spec's tools (built-in, custom, MCP) behind the spec's middleware: call them with
    #: ``tools.execute(name, input, ctx)`` (validated, never raising for a tool's failure).
    tools: ToolRegistry
    state: StateReader | None = None
    workspace: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)


class ExtensionTurn:
    """A custom turn with the AgentSpec it was built from (what a sandbox runs it by)."""

    def __init__(self, inner: Turn, spec: AgentSpec, state: StateReader | None = None) -> None:
        self.inner = inner
        self.spec = spec
        self.state = state

    async def execute(self, input: TurnInput) -> TurnOutput:
        """Run the custom turn."""
        return await self.inner.execute(input)


class ImageTurn:
    """An agent whose custom turn lives in its sandbox image only: what the host hands a
    sandbox environment (which runs the spec there), never run on the host itself."""

    def __init__(self, spec: AgentSpec, state: StateReader | None = None) -> None:
        if spec.turn is None:
            raise SpecError(f"agent {spec.name!r} names no custom turn (turn: {{entry_point: NAME}})")
        self.spec = spec
        self.state = state
        self.entry_point = spec.turn.entry_point

    async def execute(self, input: TurnInput) -> TurnOutput:
        """Refused: the turn's code is in the sandbox image, not here.

        Raises:
            TurnError: ``non_retryable``, always.
        """
        from layer0 import TurnError

        raise TurnError.non_retryable(
            f"agent {self.spec.name!r}: the custom turn {self.entry_point!r} runs only in a "
            "sandbox whose image registers it (run it through a sandbox environment)"
        )


def registered(what: str) -> dict[str, list[EntryPoint]]:
    """The entry points of ``what``'s group (a key of ``EXTENSION_GROUPS``), by name."""
    found: dict[str, list[EntryPoint]] = {}
    for point in entry_points(group=EXTENSION_GROUPS[what]):
        found.setdefault(point.name, []).append(point)
    return found


def load_extension(
    what: str, name: str, *, agent: str, timeout_s: float = LOAD_TIMEOUT_S
) -> Callable[..., Any]:
    """The factory the entry point ``name`` of ``what``'s group loads.

    Raises:
        SpecError: ``agent 'A': <what> 'N': why`` — not registered (the message lists the
            registered names), registered twice, not loading, or not callable.
    """
    group = EXTENSION_GROUPS[what]
    points = registered(what).get(name, [])
    where = f"agent {agent!r}: {what} {shorten(name, 80)!r}"
    if not points:
        known = ", ".join(sorted(registered(what))) or "none"
        raise SpecError(
            f"{where}: not registered in the sandbox image (entry-point group {group} holds: "
            f"{known}); {_HINT}"
        )
    if len({p.value for p in points}) > 1:
        values = ", ".join(sorted({p.value for p in points}))
        raise SpecError(f"{where}: registered twice in entry-point group {group} ({values})")
    factory: Callable[..., Any] = _load(points[0], timeout_s, where)
    if not callable(factory):
        raise SpecError(
            f"{where}: entry point {points[0].value!r} is a {type(factory).__name__}, not callable"
        )
    return factory


def check_extensions(spec: AgentSpec, *, skip: Collection[str] = ()) -> list[str]:
    """One problem per extension ``spec`` names that does not load here (empty: all do);
    extensions of the kinds in ``skip`` (e.g. ``provider``: one was given) are not asked for."""
    problems: list[str] = []
    for what, name in spec.extensions():
        if what in skip:
            continue
        try:
            load_extension(what, name, agent=spec.name)
        except SpecError as e:
            problems.append(str(e))
    return problems


def build_extensions(what: str, names: Sequence[tuple[str, dict[str, Any]]], *, agent: str) -> list[Any]:
    """``factory(options)`` of each (name, options), in order (hooks, middleware)."""
    built: list[Any] = []
    for name, options in names:
        factory = load_extension(what, name, agent=agent)
        built.append(call_extension_factory(factory, f"agent {agent!r}: {what} {name!r}", dict(options)))
    return built


def call_extension_factory(factory: Callable[..., Any], where: str, *args: Any) -> Any:
    """``factory(*args)``; what it raises becomes a SpecError led by ``where``."""
    try:
        return factory(*args)
    except SpecError as e:
        raise SpecError(f"{where}: {e}") from e
    except Exception as e:
        raise SpecError(f"{where}: building it raised {shorten(f'{type(e).__name__}: {e}', 300)}") from e


def _load(point: EntryPoint, timeout_s: float, where: str) -> Any:
    """``point.load()`` in a daemon thread, waited on at most ``timeout_s`` seconds."""
    result: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(point.load())
        except BaseException as e:  # SystemExit from a module's top level too
            failure.append(e)

    thread = threading.Thread(target=run, name=f"load {point.name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise SpecError(f"{where}: loading {point.value!r} did not finish within {timeout_s:g}s")
    if failure:
        error = failure[0]
        raise SpecError(
            f"{where}: loading {point.value!r} raised {shorten(f'{type(error).__name__}: {error}', 300)}"
        )
    return result[0]
