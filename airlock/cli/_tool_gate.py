"""Do an agent's custom tools load in its sandbox image? Asked whenever a configuration is loaded to run.

``airlock doctor`` asks it of every agent. ``airlock serve`` asks at start: an agent whose tools
do not load is a warning in the log, and the controller serves the others. ``airlock run`` asks
before anything is provisioned: such a run is refused (exit 3) before a local model is brought
up or a sandbox started.

The image answers in a throwaway container (``airlock.images.check_custom_tools``). Its answer
is kept in the data directory, keyed by the image's id, the agent and its import paths, so a run
pays for that container only when one of them changed. Nothing is built or pulled here. An image
that is not present, or an engine that cannot be asked, is not an answer: it is reported and the
run goes on to say why it cannot start.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airlock.sandbox import DoctorCheck as Check

if TYPE_CHECKING:
    from airlock.config import AgentConfig, AirlockConfig

__all__ = ["ToolCheckCache", "custom_tool_checks", "refuse_broken_tools", "warn_broken_tools"]

logger = logging.getLogger("airlock.cli")

#: Most answers kept (the oldest go first).
_CACHE_ENTRIES = 64
_FIX = (
    "install the tools' packages in the image (airlock images build --name IMAGE ...) or fix the import paths"
)


@dataclass(frozen=True)
class ToolCheckCache:
    """Answers already given, in a small JSON file: ``{key: {"tools": [...], "problems": [...]}}``.

    A file that cannot be read is treated as empty, and one that cannot be written only costs the
    next run a check: the cache never decides an answer.
    """

    path: Path

    @staticmethod
    def key(image_id: str, agent: str, paths: Sequence[str]) -> str:
        return json.dumps([image_id, agent, list(paths)])

    def _read(self) -> dict[str, Any]:
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def get(self, key: str) -> tuple[list[str], list[str]] | None:
        entry = self._read().get(key)
        if not isinstance(entry, dict):
            return None
        tools, problems = entry.get("tools"), entry.get("problems")
        if not (isinstance(tools, list) and isinstance(problems, list)):
            return None
        return [str(t) for t in tools], [str(p) for p in problems]

    def put(self, key: str, tools: Sequence[str], problems: Sequence[str]) -> None:
        entries = self._read()
        entries.pop(key, None)
        entries[key] = {"tools": list(tools), "problems": list(problems)}
        kept = dict(list(entries.items())[-_CACHE_ENTRIES:])
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tool-checks-", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(kept, f)
            os.replace(tmp, self.path)
        except OSError as e:
            logger.debug("custom tool checks not cached in %s: %s", self.path, e)


async def custom_tool_checks(
    agents: Sequence[AgentConfig], cache: ToolCheckCache | None = None
) -> list[Check]:
    """One check per agent with custom tools: ``ok`` (they load, in its image), ``error`` (they
    do not: one problem per line, naming the agent and the path), or ``warning`` (not checked,
    and why)."""
    return [answer.check for answer in await _answers(agents, cache)]


@dataclass(frozen=True)
class _Answer:
    check: Check
    #: The image's answer: one line per path that does not load (empty when they all do, or
    #: when the image could not be asked).
    problems: Sequence[str] = ()


async def _answers(agents: Sequence[AgentConfig], cache: ToolCheckCache | None) -> list[_Answer]:
    client: list[Any] = []  # one engine client for all, made when first needed
    return [
        await _check_agent(a, client, cache) for a in agents if a.spec.custom_tools or a.spec.extensions()
    ]


async def _check_agent(agent: AgentConfig, client: list[Any], cache: ToolCheckCache | None) -> _Answer:
    from airlock.errors import ImageError
    from airlock.images import check_custom_tools, docker_client, find_image
    from airlock.sandbox import backend
    from layer0 import EnvError

    name, paths = f"custom tools ({agent.name})", agent.spec.custom_tools
    extensions = agent.spec.extensions()
    listed = ", ".join([*paths, *(f"{what} {entry}" for what, entry in extensions)])
    chosen = backend(agent.backend)
    if "container" not in chosen.isolations:
        return _Answer(
            Check(
                name,
                "warning",
                f"not checked: backend {agent.backend} imports {listed} from this machine's Python",
                f"run the agent once (airlock run {agent.name} ...) to see that they import",
            )
        )
    if chosen.local_image is None:
        return _Answer(
            Check(
                name,
                "warning",
                f"not checked here: backend {agent.backend} runs its sandboxes' images elsewhere",
                f"run the agent once (airlock run {agent.name} ...) to see that they import",
            )
        )
    try:
        image = chosen.local_image(agent.environment)
    except EnvError as e:  # an isolation the backend refuses: its own checks and a run say so
        return _Answer(Check(name, "warning", f"not checked: {e}"))
    try:
        if not client:
            client.append(await asyncio.to_thread(docker_client))
        attrs = await asyncio.to_thread(find_image, client[0], image)
        if attrs is None:
            return _Answer(
                Check(
                    name,
                    "warning",
                    f"not checked: image {image} is not present here",
                    f"build it: airlock images build --name {image} --requirements FILE / --wheel FILE",
                )
            )
        image_id = attrs.get("Id")
        asked = [*paths, *(f"{what}:{entry}" for what, entry in extensions)]
        key = ToolCheckCache.key(image_id, agent.name, asked) if cache is not None and image_id else None
        known = await asyncio.to_thread(cache.get, key) if cache is not None and key else None
        if known is not None:
            tools, problems = known
        else:
            found = await check_custom_tools(client[0], image, agent.name, paths, extensions=extensions)
            tools, problems = list(found.tools), list(found.problems)
            if cache is not None and key:
                await asyncio.to_thread(cache.put, key, tools, problems)
    except (ImageError, EnvError) as e:
        return _Answer(
            Check(
                name,
                "error",
                f"cannot check {listed} in image {image}: {e}",
                "see airlock doctor's Docker checks",
            )
        )
    if problems:
        return _Answer(
            Check(name, "error", f"in image {image}:\n" + "\n".join(f"  {p}" for p in problems), _FIX),
            problems,
        )
    return _Answer(Check(name, "ok", _loaded(tools, image, extensions)))


def _loaded(tools: Sequence[str], image: str, extensions: Sequence[tuple[str, str]]) -> str:
    """What loads in ``image``: the tools, and the extensions when the agent names some."""
    loaded = f"{len(tools)} tool(s) load in image {image}: {', '.join(tools)}"
    if extensions:
        loaded += "; so do the extensions " + ", ".join(f"{what} {entry}" for what, entry in extensions)
    return loaded


def _cache_in(data_dir: Path) -> ToolCheckCache:
    return ToolCheckCache(data_dir / "tool-checks.json")


async def refuse_broken_tools(agent: AgentConfig, data_dir: Path) -> None:
    """Before ``agent`` is run: raise when its custom tools do not load in its image.

    Raises:
        EnvError: ``provision_failed``, naming the agent, the image and each path's problem (the
            error the sandbox's runner would give, before anything is started).
    """
    from layer0 import EnvError

    for answer in await _answers([agent], _cache_in(data_dir)):
        if answer.problems:
            raise EnvError.provision_failed(
                f"the custom tools of agent {agent.name!r} do not load {answer.check.message}\nfix: {_FIX}"
            )


async def warn_broken_tools(config: AirlockConfig, data_dir: Path) -> list[Check]:
    """At a controller's start: log a warning for each agent whose custom tools do not load, or
    could not be checked; the checks, for the caller to show."""
    checks = await custom_tool_checks(list(config.agents.values()), _cache_in(data_dir))
    for check in checks:
        if check.status != "ok":
            logger.warning("%s: %s", check.name, check.message)
    return checks
