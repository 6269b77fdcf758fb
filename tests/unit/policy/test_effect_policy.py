"""check_effect: every effect type against an agent's EffectPolicy and the job it came from."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from airlock.policy.effects import (
    MAX_KEY_CHARS,
    EffectContext,
    EffectPolicy,
    check_effect,
    json_size,
)
from layer0 import (
    AgentId,
    CustomEffect,
    Delegate,
    DeleteMemory,
    Effect,
    Handoff,
    Log,
    LogLevel,
    Scope,
    SessionId,
    Signal,
    SignalPayload,
    TurnInput,
    WorkflowId,
    WriteMemory,
)

OWN = EffectContext(agent=AgentId("boss"), session=SessionId("s-own"))
NO_SESSION = EffectContext(agent=AgentId("boss"), session=None)
DEFAULT = EffectPolicy()
GRANTED = EffectPolicy(
    delegate=("helper",),
    handoff=("billing",),
    memory=("session", "global"),
    signal=("wf-1",),
    custom=("notify",),
)


def write(scope: Scope, key: str = "k", value: object = 1) -> WriteMemory:
    return WriteMemory(scope=scope, key=key, value=value)


def delegate(agent: str, session: str | None = None, **metadata: object) -> Delegate:
    sid = SessionId(session) if session is not None else None
    return Delegate(agent=AgentId(agent), input=TurnInput.new("task", session=sid, metadata=metadata or None))


def signal(target: str, data: object = None) -> Signal:
    return Signal(target=WorkflowId(target), payload=SignalPayload(signal_type="ping", data=data))


# -- defaults ------------------------------------------------------------------------------------


def test_the_default_policy_grants_only_the_jobs_own_session_and_logs() -> None:
    assert DEFAULT.memory == ("session",)
    assert (DEFAULT.delegate, DEFAULT.handoff, DEFAULT.signal, DEFAULT.custom) == ((), (), (), ())
    assert check_effect(DEFAULT, write(Scope.session("s-own")), OWN) is None
    assert check_effect(DEFAULT, DeleteMemory(scope=Scope.session("s-own"), key="k"), OWN) is None
    assert check_effect(DEFAULT, Log(level=LogLevel.INFO, message="hi"), OWN) is None
    refused: list[Effect] = [
        write(Scope.global_()),
        DeleteMemory(scope=Scope.global_(), key="k"),
        delegate("helper"),
        Handoff(agent=AgentId("billing"), state=None),
        signal("wf-1"),
        CustomEffect(effect_type="notify", data=None),
    ]
    for effect in refused:
        assert check_effect(DEFAULT, effect, OWN) is not None, effect


# -- memory --------------------------------------------------------------------------------------


def test_another_sessions_scope_is_refused_even_with_the_session_grant() -> None:
    for effect in (
        write(Scope.session("s-other")),
        write(Scope.session("s-other"), "history", []),
        DeleteMemory(scope=Scope.session("s-other"), key="history"),
    ):
        reason = check_effect(GRANTED, effect, OWN)
        assert reason == "session 's-other' is not this job's session ('s-own')"


def test_a_session_scope_is_refused_to_a_job_without_a_session() -> None:
    reason = check_effect(GRANTED, write(Scope.session("s-any"), "history", []), NO_SESSION)
    assert reason == "session 's-any' is not this job's (the job has no session)"


def test_the_own_session_history_is_always_allowed_other_keys_need_the_grant() -> None:
    none = EffectPolicy(memory=())
    assert check_effect(none, write(Scope.session("s-own"), "history", [{"role": "user"}]), OWN) is None
    assert check_effect(none, DeleteMemory(scope=Scope.session("s-own"), key="history"), OWN) is None
    assert check_effect(none, write(Scope.session("s-own"), "note"), OWN) == (
        "agent boss may not write session memory (not granted in effects.memory)"
    )


def test_global_memory_needs_the_global_grant() -> None:
    assert check_effect(DEFAULT, write(Scope.global_()), OWN) == (
        "agent boss may not write global memory (not granted in effects.memory)"
    )
    assert check_effect(EffectPolicy(memory=("global",)), write(Scope.global_()), NO_SESSION) is None


@pytest.mark.parametrize(
    "scope", [Scope.workflow("wf-1"), Scope.agent("wf-1", "boss"), Scope.custom("tenant:acme")]
)
def test_workflow_agent_and_custom_scopes_are_refused_unless_granted(scope: Scope) -> None:
    reason = check_effect(GRANTED, write(scope), IN_WF)
    assert reason is not None and "not granted in effects.memory" in reason
    assert check_effect(GRANTED, DeleteMemory(scope=scope, key="k"), IN_WF) == reason


SCOPED = EffectPolicy(memory={"scopes": ["session", "workflow", "agent", "custom:team-notes"]})
IN_WF = EffectContext(agent=AgentId("boss"), session=SessionId("s-own"), workflow=WorkflowId("wf-1"))


@pytest.mark.parametrize(
    "scope", [Scope.workflow("wf-1"), Scope.agent("wf-1", "boss"), Scope.custom("team-notes")]
)
def test_granted_scopes_of_the_jobs_own_workflow_and_agent_are_allowed(scope: Scope) -> None:
    assert SCOPED.memory == ("session", "workflow", "agent", "custom:team-notes")
    assert check_effect(SCOPED, write(scope), IN_WF) is None
    assert check_effect(SCOPED, DeleteMemory(scope=scope, key="k"), IN_WF) is None


def test_another_workflows_or_agents_scope_is_refused_even_when_granted() -> None:
    assert check_effect(SCOPED, write(Scope.workflow("wf-2")), IN_WF) == (
        "workflow 'wf-2' is not this job's workflow ('wf-1')"
    )
    assert check_effect(SCOPED, write(Scope.agent("wf-2", "boss")), IN_WF) == (
        "workflow 'wf-2' is not this job's workflow ('wf-1')"
    )
    assert check_effect(SCOPED, write(Scope.agent("wf-1", "helper")), IN_WF) == (
        "agent scope 'helper' is not agent boss's own"
    )
    assert check_effect(SCOPED, write(Scope.workflow("wf-1")), OWN) == (
        "workflow 'wf-1' is not this job's (the job's workflow is not known)"
    )
    assert check_effect(SCOPED, write(Scope.custom("other")), IN_WF) == (
        "agent boss may not write custom memory scope 'other' (not granted in effects.memory)"
    )


def test_unknown_memory_grants_are_rejected() -> None:
    for bad in ("workflows", "custom:", "tenant"):
        with pytest.raises(ValidationError, match="unknown memory scope"):
            EffectPolicy(memory=(bad,))


def test_memory_value_and_key_sizes_are_capped() -> None:
    small = EffectPolicy(max_value_bytes=16)
    assert check_effect(small, write(Scope.session("s-own"), "k", "x" * 14), OWN) is None  # 16 with quotes
    assert check_effect(small, write(Scope.session("s-own"), "k", "x" * 15), OWN) == (
        "memory value of 17 bytes exceeds max_value_bytes (16)"
    )
    # The history is a memory value like any other: capped too.
    assert check_effect(small, write(Scope.session("s-own"), "history", ["x" * 20]), OWN) is not None
    long_key = "k" * (MAX_KEY_CHARS + 1)
    reason = check_effect(GRANTED, write(Scope.session("s-own"), long_key), OWN)
    assert reason == f"memory key of {MAX_KEY_CHARS + 1} characters (at most {MAX_KEY_CHARS})"


# -- delegate, handoff, signal, custom, log -------------------------------------------------------------


def test_delegate_only_to_listed_agents() -> None:
    assert check_effect(GRANTED, delegate("helper"), OWN) is None
    assert check_effect(GRANTED, delegate("admin"), OWN) == (
        "agent boss may not delegate to 'admin' (granted in effects.delegate: helper)"
    )
    assert check_effect(DEFAULT, delegate("helper"), OWN) == (
        "agent boss may not delegate to 'helper' (granted in effects.delegate: none)"
    )


def test_a_delegate_may_not_carry_another_session_or_controller_metadata() -> None:
    assert check_effect(GRANTED, delegate("helper", "s-own"), OWN) is None
    assert check_effect(GRANTED, delegate("helper", "s-other"), OWN) == (
        "a delegate's input may not name session 's-other' (not this job's)"
    )
    assert check_effect(GRANTED, delegate("helper", "s-any"), NO_SESSION) is not None
    reason = check_effect(GRANTED, delegate("helper", handoff_from="billing"), OWN)
    assert reason == "a delegate's input may not set metadata handoff_from (the controller sets it)"


def test_a_delegate_input_is_size_capped() -> None:
    big = Delegate(agent=AgentId("helper"), input=TurnInput.new("x" * 100))
    reason = check_effect(GRANTED.model_copy(update={"max_value_bytes": 64}), big, OWN)
    assert reason is not None and reason.startswith("delegate input of ")


def test_handoff_only_to_listed_agents_and_its_state_is_capped() -> None:
    assert check_effect(GRANTED, Handoff(agent=AgentId("billing"), state={"t": 1}), OWN) is None
    assert check_effect(GRANTED, Handoff(agent=AgentId("helper"), state=None), OWN) == (
        "agent boss may not hand off to 'helper' (granted in effects.handoff: billing)"
    )
    small = GRANTED.model_copy(update={"max_value_bytes": 8})
    assert check_effect(small, Handoff(agent=AgentId("billing"), state="x" * 8), OWN) == (
        "handoff state of 10 bytes exceeds max_value_bytes (8)"
    )


def test_signal_only_to_listed_workflows_and_its_payload_is_capped() -> None:
    assert check_effect(GRANTED, signal("wf-1", {"n": 1}), OWN) is None
    assert check_effect(GRANTED, signal("wf-prod"), OWN) == (
        "agent boss may not signal workflow 'wf-prod' (granted in effects.signal: wf-1)"
    )
    small = GRANTED.model_copy(update={"max_value_bytes": 40})
    reason = check_effect(small, signal("wf-1", "x" * 40), OWN)
    assert reason is not None and reason.startswith("signal payload of ")


def test_custom_effects_are_refused_unless_their_type_is_listed() -> None:
    assert check_effect(GRANTED, CustomEffect(effect_type="notify", data={"to": "x"}), OWN) is None
    assert check_effect(GRANTED, CustomEffect(effect_type="shell", data=None), OWN) == (
        "agent boss may not declare custom effect 'shell' (granted in effects.custom: notify)"
    )
    small = GRANTED.model_copy(update={"max_value_bytes": 4})
    assert check_effect(small, CustomEffect(effect_type="notify", data="xxxx"), OWN) == (
        "custom effect of 6 bytes exceeds max_value_bytes (4)"
    )


def test_logs_are_allowed_but_size_capped() -> None:
    small = EffectPolicy(max_value_bytes=64)
    assert check_effect(small, Log(level=LogLevel.WARN, message="short"), OWN) is None
    reason = check_effect(small, Log(level=LogLevel.INFO, message="m", data="x" * 64), OWN)
    assert reason is not None and reason.startswith("log of ")


# -- counts and context -------------------------------------------------------------------------------


def test_an_output_with_more_than_max_effects_has_every_effect_refused() -> None:
    policy = EffectPolicy(max_effects=3)
    log = Log(level=LogLevel.INFO, message="hi")
    within = EffectContext(agent=AgentId("boss"), session=None, index=2, count=3)
    assert check_effect(policy, log, within) is None
    for index in (0, 3):
        over = EffectContext(agent=AgentId("boss"), session=None, index=index, count=4)
        assert check_effect(policy, log, over) == (
            "the turn declared 4 effects, more than max_effects (3) of agent boss; none of them is applied"
        )


def test_an_unknown_declaring_agent_is_named_as_such() -> None:
    reason = check_effect(DEFAULT, delegate("helper"), EffectContext(agent=None, session=None))
    assert reason == "an unknown agent may not delegate to 'helper' (granted in effects.delegate: none)"


def test_json_size_counts_utf8_bytes_of_compact_json() -> None:
    assert json_size({"a": [1, 2]}) == len('{"a":[1,2]}')
    assert json_size("é") == 4  # two quotes and two bytes


# -- the model ----------------------------------------------------------------------------------------


def test_the_policy_forbids_unknown_keys_and_bad_limits() -> None:
    with pytest.raises(ValidationError):
        EffectPolicy.model_validate({"delegates": ["x"]})
    with pytest.raises(ValidationError):
        EffectPolicy.model_validate({"memory": ["workflows"]})
    for bad in (0, -1, "64", 1.5):
        with pytest.raises(ValidationError):
            EffectPolicy.model_validate({"max_effects": bad})
    with pytest.raises(ValidationError):
        EffectPolicy.model_validate({"delegate": [""]})


def test_names_a_sandbox_chose_are_cut_short_in_reasons() -> None:
    reason = check_effect(DEFAULT, delegate("a" * 10_000), OWN)
    assert reason is not None and len(reason) < 300 and "(10000 characters)" in reason
