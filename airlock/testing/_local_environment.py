"""LocalEnvironment: run a turn in this process, with no isolation at all."""

from __future__ import annotations

from layer0 import EnvError, EnvironmentSpec, Turn, TurnError, TurnInput, TurnOutput


class LocalEnvironment:
    """A ``layer0.Environment`` that just calls ``turn.execute(input)`` in-process.

    It provides NO isolation, credential injection, resource limits or network
    policy. So that nothing is silently weakened, a spec that asks for any of those
    is refused with ``EnvError`` before the turn runs; use it only with
    ``EnvironmentSpec()`` (for tests, development, and trusted turns).
    """

    async def run(self, turn: Turn, input: TurnInput, spec: EnvironmentSpec) -> TurnOutput:
        """Execute ``turn`` directly.

        Raises:
            EnvError: ``isolation_violation`` if ``spec`` asks for isolation or a network
                policy, ``credential_failed`` for credentials, ``resource_exceeded`` for
                resource limits (none can be provided here); ``turn_error`` when the turn
                raises ``TurnError`` (chained); ``other`` for any other exception (chained).
        """
        self._refuse_unprovidable(spec)
        try:
            return await turn.execute(input)
        except TurnError as e:
            raise EnvError.from_turn_error(e) from e
        except Exception as e:
            raise EnvError.other(f"turn raised {type(e).__name__}: {e}") from e

    @staticmethod
    def _refuse_unprovidable(spec: EnvironmentSpec) -> None:
        if spec.isolation:
            kinds = ", ".join(b.type for b in spec.isolation)
            raise EnvError.isolation_violation(
                f"LocalEnvironment provides no isolation but the spec asks for: {kinds}; "
                "use a sandboxed environment (e.g. Docker)"
            )
        if spec.network is not None:
            raise EnvError.isolation_violation("LocalEnvironment cannot enforce a network policy")
        if spec.credentials:
            names = ", ".join(c.name for c in spec.credentials)
            raise EnvError.credential_failed(f"LocalEnvironment cannot inject credentials: {names}")
        if spec.resources is not None and any(
            getattr(spec.resources, f) is not None for f in ("cpu", "memory", "disk", "gpu")
        ):
            raise EnvError.resource_exceeded("LocalEnvironment cannot enforce resource limits")
