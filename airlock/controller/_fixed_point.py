"""Fixed-point jobs (``until_stable``): the agent re-run on its own output until it is stable.

Each iteration is one turn (a fresh sandbox) whose input is the previous iteration's output
message. Its state hashes are those of the message it was given and the message it returned:
it is stable when they are equal, in a limit cycle when a returned message repeats one of the
last ``window`` ones (the job's output is then the first state of the cycle), and spent after
``max_iterations``. The job's output is the chosen iteration's, its metadata summed over every
iteration, its exit reason ``custom("fixed_point_<exit>")``. Each iteration's hashes and output
are kept on the job, so a resumed job continues with the iteration it was in.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import JsonValue

from airlock.jobs import Job
from airlock.weave import FixedPoint, RecordType, state_hash
from layer0 import ExitReason, TurnInput, TurnMetadata, TurnOutput

from ._store import JobStore
from ._weaving import Weaves


class IterationRunner(Protocol):
    """What runs one iteration's turn of a job (resumes included)."""

    async def turn_of(self, job: Job, input: TurnInput) -> TurnOutput | None: ...


#: The exit reasons of a fixed-point job's output.
EXIT_REASONS = {
    "stable": "fixed_point_stable",
    "cycle": "fixed_point_cycle",
    "max_iterations": "fixed_point_max_iterations",
}


def message_hash(output_or_input: TurnOutput | TurnInput) -> str:
    """The state hash of the message a turn was given or returned."""
    return state_hash(output_or_input.message.model_dump(mode="json"))


def next_input(first: TurnInput, previous: TurnOutput) -> TurnInput:
    """The input of the next iteration: the previous output's message, everything else as
    the job's own input."""
    return first.model_copy(update={"message": previous.message})


def summed(outputs: list[TurnOutput]) -> TurnMetadata:
    """Every iteration's usage, added up."""
    total = TurnMetadata.empty()
    for out in outputs:
        m = out.metadata
        total = total.model_copy(
            update={
                "tokens_in": total.tokens_in + m.tokens_in,
                "tokens_out": total.tokens_out + m.tokens_out,
                "cost": total.cost + m.cost,
                "turns_used": total.turns_used + m.turns_used,
                "tools_called": [*total.tools_called, *m.tools_called],
                "duration": total.duration + m.duration,
            }
        )
    return total


async def run_until_stable(
    turns: IterationRunner, job: Job, *, root: str, weaves: Weaves, store: JobStore
) -> TurnOutput | None:
    """Run ``job`` (whose tree is ``root``) to its fixed point; None when an iteration waits
    for approval."""
    run = job.fixed_point
    assert run is not None
    tracker = FixedPoint(max_iterations=run.max_iterations, window=run.window)
    for pre, post in run.hashes:
        tracker.observe(pre, post)
    outputs = list(run.outputs)
    current = next_input(job.input, outputs[-1]) if outputs else job.input
    while True:
        output = await turns.turn_of(job, current)
        if output is None:
            return None
        pre, post = message_hash(current), message_hash(output)
        outputs.append(output)
        result = tracker.observe(pre, post)
        run = run.model_copy(update={"hashes": [*run.hashes, (pre, post)], "outputs": outputs})
        content: dict[str, JsonValue] = {
            "iteration": len(outputs),
            "exit": result.exit if result is not None else None,
        }
        await weaves.record(
            root,
            job=job.id,
            agent=job.agent,
            type=RecordType.SILENCE,
            kind="iteration",
            content=content,
            pre=pre,
            post=post,
        )
        if result is not None:
            run = run.model_copy(update={"exit": result.exit, "chosen": result.chosen})
            await store.update(job.id, fixed_point=run)
            chosen = outputs[result.chosen]
            return chosen.model_copy(
                update={
                    "exit_reason": ExitReason.custom(EXIT_REASONS[result.exit]),
                    "metadata": summed(outputs),
                }
            )
        await store.update(job.id, fixed_point=run)
        await store.clear_checkpoint(job.id)
        current = next_input(job.input, output)
