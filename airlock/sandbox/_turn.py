"""What a sandboxed turn must be: describable as an AgentSpec (the runner rebuilds it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from layer0 import EnvError, ExitReason, Turn, TurnInput, TurnMetadata, TurnOutput

if TYPE_CHECKING:
    from airlock.spec import AgentSpec


def agent_spec_of(turn: Turn) -> AgentSpec:
    """The AgentSpec a turn was built from (``airlock.build.build_turn``, ``build_agent``),
    stands for (``airlock.build.image_turn``: a custom turn of the image) or runs (``RemoteTurn``).

    Raises:
        EnvError: ``other`` when the turn carries none — its code cannot cross into a sandbox
            (a Turn class of the host's: only a turn registered in the image, by entry point
            of ``airlock.turns`` and named in ``AgentSpec.turn``, runs there).
    """
    from airlock.spec import AgentSpec

    spec = getattr(turn, "spec", None)
    if not isinstance(spec, AgentSpec):
        raise EnvError.other(
            f"{type(turn).__name__} cannot run in a sandbox: the runner rebuilds the turn from its "
            "AgentSpec, and this turn has none (build it with build_turn(spec), or use a "
            "RemoteTurn; a custom Turn class runs there when the image's package registers it as "
            "an entry point of airlock.turns and the spec names it: turn: {entry_point: NAME}, "
            "handed over as airlock.build.image_turn(spec))"
        )
    return spec


def hard_timeout_s(
    agent: AgentSpec, input: TurnInput, env_timeout: float | None, grace: float
) -> float | None:
    """Seconds after which the sandbox is killed: the turn's ``max_duration`` (its input's
    TurnConfig, else the AgentSpec defaults) plus ``grace``, capped by ``env_timeout``."""
    ms = agent.max_duration_for(input)
    limits = [t for t in (env_timeout, ms / 1000 + grace if ms is not None else None) if t is not None]
    return min(limits) if limits else None


def timeout_output(who: str, limit_s: float, elapsed_s: float) -> TurnOutput:
    """The output of a turn whose sandbox was killed at its deadline (exit reason timeout)."""
    return TurnOutput(
        message=f"{who} killed: the turn ran past its {limit_s:.1f}s limit",
        exit_reason=ExitReason.timeout(),
        metadata=TurnMetadata.empty().model_copy(update={"duration": int(elapsed_s * 1000)}),
    )
