"""Do an agent's custom tools and extensions load in its sandbox image? Asked of the image,
before any job.

The image's own airlock loads the import paths exactly as its runner will
(``airlock.tools.load_custom_tools``), and the extensions the agent names by entry point
(``airlock.turn.load_extension``: custom provider, hooks, context strategy, tool middleware,
turn), in a throwaway container: no network, read-only,
non-root, bounded. Its answer is the sandbox's word, so it is parsed and bounded before it
is shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from airlock.errors import ImageError, shorten

from ._builder import VENV
from ._throwaway import run_throwaway

__all__ = ["ToolCheck", "check_custom_tools"]

#: Leads the line holding the answer (a tool module may print anything before it).
MARKER = "AIRLOCK-TOOL-CHECK "
_SCRIPT = f"""
import json, os, sys
agent, extensions, paths = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
answer = {{"tools": [], "problems": [], "extensions": []}}
try:
    from airlock.errors import SpecError
    from airlock.tools import load_custom_tools
    if extensions:
        from airlock.turn import load_extension
except ImportError as e:
    answer["problems"].append(
        "the image's airlock cannot load custom tools or extensions (%s); build the image on a current "
        "runner image" % e
    )
else:
    try:
        answer["tools"] = [t.name for t in load_custom_tools(paths, agent=agent)]
    except SpecError as e:
        answer["problems"] += str(e).splitlines()
    for what, name in extensions:
        try:
            load_extension(what, name, agent=agent)
            answer["extensions"].append("%s %s" % (what, name))
        except SpecError as e:
            answer["problems"] += str(e).splitlines()
    if answer["problems"]:
        answer["tools"], answer["extensions"] = [], []
sys.stdout.flush()
sys.__stdout__.write("\\n{MARKER}" + json.dumps(answer) + "\\n")
sys.__stdout__.flush()
os._exit(0)  # a tool module's own threads never hold the check open
"""

_Line = Annotated[str, AfterValidator(lambda s: shorten(s, 600))]


class ToolCheck(BaseModel):
    """The answer: the tools' names and the extensions (``what name``) when every path and
    extension loads, else one problem per line."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: list[_Line] = Field(max_length=256)
    problems: list[_Line] = Field(max_length=256)
    extensions: list[_Line] = Field(default_factory=list, max_length=256)


async def check_custom_tools(
    client: Any,
    image: str,
    agent: str,
    paths: Sequence[str],
    *,
    extensions: Sequence[tuple[str, str]] = (),
    python: str = f"{VENV}/bin/python",
    timeout_s: float = 60.0,
) -> ToolCheck:
    """Load ``paths`` and ``extensions`` (``AgentSpec.extensions()``: (what, entry-point name)
    pairs) for ``agent`` with ``image``'s interpreter ``python``, as its runner would.

    Raises:
        ImageError: the image is missing, the check did not finish in ``timeout_s``, or it
            ended without an answer (the message carries its last error output).
    """
    result = await run_throwaway(
        client,
        image,
        [python, "-c", _SCRIPT, agent, json.dumps([list(e) for e in extensions]), *paths],
        timeout_s=timeout_s,
        what=f"checking the custom tools of agent {agent!r}",
    )
    answers = [line for line in result.stdout.splitlines() if line.startswith(MARKER)]
    if not answers:
        raise ImageError(
            f"checking the custom tools of agent {agent!r} in image {image} gave no answer (exit "
            f"{result.exit_code}): {shorten(result.stderr.strip(), 800) or 'no error output'}"
        )
    try:
        return ToolCheck.model_validate(json.loads(answers[-1].removeprefix(MARKER)))
    except (ValueError, ValidationError) as e:
        raise ImageError(f"the custom tool check in image {image} answered something unreadable: {e}") from e
