"""``airlock approve / reject / signal`` and ``airlock jobs pause / resume / step / inspect /
audit / verify / show`` through CliRunner against a real ControllerServer (its own thread and
event loop, real gRPC on loopback) over the controller tests' fake JobService; and the
approval, resume and turn-control events as ``jobs watch`` renders them."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, cast

import pytest
from rich.console import Console
from typer.testing import CliRunner

from airlock.behaviour import ApprovalDecision
from airlock.cli import app
from airlock.cli._common import EXIT_USAGE
from airlock.cli._jobs import JobView, RemoteAgent
from airlock.controller import ControllerServer, JobService
from airlock.jobs import (
    ApprovalChanged,
    FixedPointRun,
    JobEvent,
    JobEventData,
    JobResumed,
    JobState,
    SandboxActivity,
)
from airlock.turn import Checkpoint, SignalDelivered, TurnSuspended
from airlock.weave import ChainBreak, ChainReport, RecordType
from tests.support.principals import token_of
from tests.unit.controller.test_api_governance import (
    CALLS,
    PEOPLE,
    T0,
    TOKEN,
    FakeService,
    awaiting_job,
    weave_records,
    with_samples,
)


class BackgroundServer:
    """A ControllerServer over a fake service, served from its own thread and event loop."""

    def __init__(self, service: FakeService) -> None:
        self.service = service
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="controller", daemon=True)
        self.server: ControllerServer | None = None

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def __enter__(self) -> str:
        self.thread.start()

        async def start() -> str:
            self.server = ControllerServer(
                cast(JobService, self.service), TOKEN, "127.0.0.1:0", authenticator=PEOPLE
            )
            return await self.server.start()

        return cast(str, self.call(start()))

    def __exit__(self, *exc: object) -> None:
        try:
            if self.server is not None:
                self.call(self.server.stop(0))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeService]:
    """The sample jobs behind a real server; the CLI finds it through its environment."""
    fake = with_samples()
    with BackgroundServer(fake) as address:
        monkeypatch.setenv("AIRLOCK_CONTROLLER", address)
        monkeypatch.setenv("AIRLOCK_TOKEN", token_of("root"))
        yield fake


def invoke(runner: CliRunner, *args: str, caller: str = "root") -> Any:
    """``airlock ARGS`` as ``caller`` (one of the controller tests' PEOPLE)."""
    return runner.invoke(app, list(args), env={"COLUMNS": "200", "AIRLOCK_TOKEN": token_of(caller)})


def flat(text: str) -> str:
    """``text`` with every run of whitespace as one space (tables pad their columns)."""
    return " ".join(text.split())


def invoke_json(runner: CliRunner, *args: str, code: int = 0, caller: str = "root") -> Any:
    result = invoke(runner, *args, "--json", caller=caller)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


# -- approve / reject --------------------------------------------------------------------------------


def test_approve_shows_who_decided_while_the_job_still_waits(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "approve", "j-wait", "--comment", "looks right", caller="ana")
    assert result.exit_code == 0, result.output
    assert "approved job j-wait as ana: it is awaiting_approval" in result.stdout
    assert "still waiting (all of ana, bob); decided so far:" in result.stdout
    assert "ana approved: looks right" in result.stdout
    result = invoke(runner, "approve", "j-wait", caller="bob")
    assert result.exit_code == 0, result.output
    assert "approved job j-wait as bob: it is queued" in result.stdout
    assert "outcome: approved; the job resumes" in result.stdout
    assert service.calls == [
        ("approve", ("j-wait", "ana", "looks right")),
        ("approve", ("j-wait", "bob", "")),
    ]


def test_approve_decides_as_the_authenticated_principal_whatever_the_os_user(
    runner: CliRunner, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "ana")
    body = invoke_json(runner, "approve", "j-wait", caller="bob")
    assert body["decision"] == "approved" and body["job"]["approval"]["decisions"][0]["approver"] == "bob"
    assert service.calls == [("approve", ("j-wait", "bob", ""))]


def test_approve_has_no_as_option(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "approve", "j-wait", "--as", "ana", caller="bob")
    assert result.exit_code == EXIT_USAGE and "No such option: --as" in result.stderr
    assert service.calls == []


def test_reject_sends_its_reason(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "reject", "j-wait", "--reason", "never delete the build", caller="bob")
    assert result.exit_code == 0, result.output
    assert "rejected job j-wait as bob: it is queued" in result.stdout
    assert "outcome: rejected; the job resumes" in result.stdout
    assert service.calls == [("reject", ("j-wait", "bob", "never delete the build"))]


def test_reject_needs_a_reason(runner: CliRunner, service: FakeService) -> None:
    assert invoke(runner, "reject", "j-wait", caller="bob").exit_code == EXIT_USAGE
    result = invoke(runner, "reject", "j-wait", "--reason", " ", caller="bob")
    assert result.exit_code == EXIT_USAGE and "--reason must not be empty" in result.stderr
    assert service.calls == []


@pytest.mark.parametrize(
    ("caller", "args", "code", "says"),
    [
        ("eve", ["approve", "j-wait"], "PERMISSION_DENIED", "'eve' is not an approver of this agent"),
        ("vic", ["approve", "j-wait"], "PERMISSION_DENIED", "needs permission jobs.approve"),
        (
            "ana",
            ["approve", "j-run"],
            "FAILED_PRECONDITION",
            "job j-run is running: it waits for no approval",
        ),
        ("ana", ["reject", "j-nope", "--reason", "x"], "NOT_FOUND", "no job 'j-nope'"),
    ],
)
def test_a_refused_decision_exits_2_saying_why(
    runner: CliRunner, service: FakeService, caller: str, args: list[str], code: str, says: str
) -> None:
    result = invoke(runner, *args, caller=caller)
    assert result.exit_code == EXIT_USAGE
    assert f"{says}" in " ".join(result.stderr.split()) and f"[{code}]" in result.stderr
    body = invoke_json(runner, *args, code=EXIT_USAGE, caller=caller)
    assert (
        body["exit_code"] == EXIT_USAGE and body["error"]["code"] == code and says in body["error"]["message"]
    )
    assert service.jobs["j-wait"] == awaiting_job()


# -- jobs show --------------------------------------------------------------------------------------------


def test_jobs_show_of_an_awaiting_job_lists_its_calls_approvers_and_decisions(
    runner: CliRunner, service: FakeService
) -> None:
    out = flat(invoke(runner, "jobs", "show", "j-wait").stdout)
    assert "awaiting_approval" in out
    assert "resumes 1" in out
    assert (
        'waiting for bash {"big": 1152921504606846976, "command": "rm -rf out"} destructive (agent ops)'
        in out
    )
    assert "http_get null (agent ops)" in out
    assert "approvers ana, bob (strategy all; on timeout: reject)" in out
    assert "deadline" in out and "decisions none yet" in out
    invoke(runner, "approve", "j-wait", "--comment", "ok", caller="ana")
    out = flat(invoke(runner, "jobs", "show", "j-wait").stdout)
    assert "ana approved: ok" in out and "outcome" not in out
    body = invoke_json(runner, "jobs", "show", "j-wait")
    approval = body["job"]["approval"]
    assert [c["name"] for c in approval["calls"]] == ["bash", "http_get"] and approval["strategy"] == "all"
    assert body["job"]["resumes"] == 1


def test_jobs_show_of_a_fixed_point_job(runner: CliRunner, service: FakeService) -> None:
    run = FixedPointRun(hashes=[("a", "b"), ("b", "c"), ("c", "b")], exit="cycle", chosen=1)
    service.add(awaiting_job("j-fp").model_copy(update={"approval": None, "resumes": 0, "fixed_point": run}))
    out = flat(invoke(runner, "jobs", "show", "j-fp").stdout)
    assert "fixed point 3 of at most 10 iterations (window 3); exit cycle, output of iteration 2" in out
    assert "resumes" not in out and "waiting for" not in out


# -- signal -------------------------------------------------------------------------------------------------


def test_signal_prints_the_count_and_the_jobs_it_reached(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "signal", "wf", "budget", "--data", '{"max_turns": 3}')
    assert result.exit_code == 0, result.output
    assert "signal budget recorded for workflow wf (its signal #1)" in result.stdout
    assert "reached 1 running job(s): j-run" in result.stdout
    result = invoke(runner, "signal", "quiet", "feedback")
    assert "its signal #2" in result.stdout and "it reached no job" in result.stdout
    body = invoke_json(runner, "signal", "wf", "cancel")
    assert body == {"workflow": "wf", "signal_type": "cancel", "count": 3, "delivered_to": ["j-run"]}
    assert [args for _, args in service.calls] == [
        ("wf", "budget", {"max_turns": 3}),
        ("quiet", "feedback", None),
        ("wf", "cancel", None),
    ]


def test_signal_with_bad_json_exits_2_before_sending(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "signal", "wf", "budget", "--data", "{max_turns: 3}")
    assert result.exit_code == EXIT_USAGE
    assert "--data is not valid JSON" in result.stderr and "{max_turns: 3}" in result.stderr
    assert service.calls == []


# -- pause / resume / step / inspect ----------------------------------------------------------------------


def test_pause_step_resume(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "jobs", "step", "j-run")
    assert result.exit_code == EXIT_USAGE and "the turn is not paused" in result.stderr
    result = invoke(runner, "jobs", "pause", "j-run")
    assert result.exit_code == 0, result.output
    assert "job j-run pauses at its next step boundary" in result.stdout
    result = invoke(runner, "jobs", "step", "j-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "model call 3: 50 in / 9 out tokens, $0.0007 (40 ms, tool_use)" in out
    assert 'tool bash {"command": "seq 3"}' in out and "✓ bash 5 ms" in out
    assert "log info (controller): step requested" in out and "paused after iteration 3" in out
    assert "model: counting" in out and "tools run: bash" in out
    assert "paused again; next: airlock jobs step j-run" in out
    body = invoke_json(runner, "jobs", "step", "j-run")
    assert body["complete"] is False and body["tools"] == ["bash"] and len(body["events"]) == 6
    assert body["events"][0]["data"]["event"]["type"] == "inference_started"
    result = invoke(runner, "jobs", "resume", "j-run")
    assert result.exit_code == 0 and "job j-run runs on" in result.stdout
    assert [name for name, _ in service.calls] == ["pause", "step", "step", "resume"]


@pytest.mark.parametrize("verb", ["pause", "resume", "step"])
def test_controls_of_a_job_without_a_running_turn_exit_2(
    runner: CliRunner, service: FakeService, verb: str
) -> None:
    result = invoke(runner, "jobs", verb, "j-wait")
    assert result.exit_code == EXIT_USAGE
    assert "job j-wait has no turn running in a sandbox now [FAILED_PRECONDITION]" in result.stderr


def test_inspect_a_paused_turn(runner: CliRunner, service: FakeService) -> None:
    service.paused.add("j-run")
    result = invoke(runner, "jobs", "inspect", "j-run")
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    assert "job j-run (ops) running; its turn is paused" in out
    assert "iterations 2" in out and "tokens in / out 120 / 30" in out
    assert "cost $0.0042" in out and "tool calls 1 (bash x1)" in out
    assert "1 user: count to three" in out
    assert '2 assistant: I will count with bash → bash({"command": "seq 3"})' in out
    assert "no pending calls" in out
    body = invoke_json(runner, "jobs", "inspect", "j-run")
    assert body["running"] is True and body["paused"] is True and body["pending"] == []
    assert body["session"]["iterations"] == 2 and body["session"]["cost"] == "0.0042"


def test_inspect_a_job_waiting_for_approval(runner: CliRunner, service: FakeService) -> None:
    out = invoke(runner, "jobs", "inspect", "j-wait").stdout
    assert "its turn is not running in a sandbox" in out and "no checkpoint yet" in out
    assert "pending calls (2)" in out and "bash" in out and "destructive" in out and "t10" in out
    body = invoke_json(runner, "jobs", "inspect", "j-wait")
    assert body["session"] is None and body["pending"] == [c.model_dump(mode="json") for c in CALLS]


# -- audit / verify ------------------------------------------------------------------------------------------


def test_audit_shows_the_tree_with_children_under_their_parent_and_hides_thoughts(
    runner: CliRunner, service: FakeService
) -> None:
    result = invoke(runner, "jobs", "audit", "j-calc")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "weave of job j-boss: 12 record(s) in 2 thread(s)" in lines[0]
    boss = next(i for i, line in enumerate(lines) if "job j-boss (boss) succeeded" in line)
    calc = next(i for i, line in enumerate(lines) if "job j-calc (calc, delegate) succeeded" in line)
    assert boss < calc and lines[calc].index("job") > lines[boss].index("job")  # nested under the boss
    out = result.stdout
    assert '#1   SPEECH  input "What is 17 * 23? Ask calc."' in out
    assert '#3   ACTION  tool_call delegate({"agent": "calc"}) -> queued  <- #2' in out
    assert '#2   ACTION  model_response → calculator({"e": "17*23"})  20/5 tokens  <- #1' in out
    assert 'tool_call calculator({"e": "17*23"}) -> 391' in out
    assert '#1   SPEECH  input "What is 17 * 23?"  <- j-boss:3' in out
    assert "YIELD   approval_requested bash wait for any of ana" in out
    assert "YIELD   approval_decision ana approved: fine" in out
    assert "SILENCE resume resume 1 (approval): approved; after model call 1" in out
    assert 'SPEECH  signal feedback {"hint": "be brief"}' in out
    assert '#8   SPEECH  model_response "17 * 23 = 391"  <- j-calc:4' in out
    assert "THOUGHT" not in out and "calc is better" not in out
    assert "1 thought record(s) hidden (show them with --thoughts)" in out
    shown = invoke(runner, "jobs", "audit", "j-boss", "--thoughts").stdout
    assert '#2   THOUGHT model_response "calc is better at this" → delegate({"agent": "calc"})' in shown
    assert "40/12 tokens  $0.0001  <- #1" in shown and "hidden" not in shown


def test_audit_json_is_the_records(runner: CliRunner, service: FakeService) -> None:
    every = [r.model_dump(mode="json") for r in weave_records()]
    assert invoke_json(runner, "jobs", "audit", "j-boss", "--thoughts") == every
    result = invoke(runner, "jobs", "audit", "j-boss", "--json")
    assert json.loads(result.stdout) == [r for r in every if r["type"] != RecordType.THOUGHT.value]
    assert "1 thought record(s) hidden" in result.stderr


def test_audit_of_a_job_without_records(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "jobs", "audit", "j-wait")
    assert result.exit_code == 0 and "job j-wait has no turn records yet" in result.stdout
    assert invoke_json(runner, "jobs", "audit", "j-wait") == []
    assert invoke(runner, "jobs", "audit", "j-nope").exit_code == EXIT_USAGE


def test_verify_exits_0_when_intact(runner: CliRunner, service: FakeService) -> None:
    result = invoke(runner, "jobs", "verify", "j-boss")
    assert result.exit_code == 0 and "chain intact: 12 records, hash chain only" in result.stdout
    service.weaves.key = b"k"
    result = invoke(runner, "jobs", "verify", "j-calc")
    assert result.exit_code == 0
    assert "chain intact: 12 records, sealed (the tree of job j-boss)" in result.stdout


def test_verify_lists_each_break_and_exits_1(runner: CliRunner, service: FakeService) -> None:
    service.reports["j-boss"] = ChainReport(
        ok=False,
        records=12,
        breaks=[
            ChainBreak(position=3, record_id="j-calc:1", problem="record j-calc:1 was modified"),
            ChainBreak(
                position=9, record_id="j-boss:6", problem="record j-boss:6 depends on j-x:1, which is missing"
            ),
        ],
    )
    result = invoke(runner, "jobs", "verify", "j-boss")
    assert result.exit_code == 1
    out = result.stdout
    assert "chain broken: 2 problem(s) in 12 records" in out
    assert "#3 j-calc:1: record j-calc:1 was modified" in out
    assert "#9 j-boss:6: record j-boss:6 depends on j-x:1, which is missing" in out
    body = invoke_json(runner, "jobs", "verify", "j-boss", code=1)
    assert body["ok"] is False and body["sealed"] is False and body["records"] == 12
    assert body["breaks"][0] == {
        "position": 3,
        "record_id": "j-calc:1",
        "problem": "record j-calc:1 was modified",
    }


# -- submit --until-stable ---------------------------------------------------------------------------------


def test_submit_until_stable_sends_the_bounds(runner: CliRunner, service: FakeService) -> None:
    result = invoke(
        runner, "submit", "calc", "hi", "--until-stable", "--max-iterations", "5", "--cycle-window", "2"
    )
    assert result.exit_code == 0, result.output
    assert invoke(runner, "submit", "calc", "hi", "--until-stable").exit_code == 0
    assert invoke(runner, "submit", "calc", "hi").exit_code == 0
    sent = [options["until_stable"] for _, (_, options) in service.calls]
    assert sent == [FixedPointRun(max_iterations=5, window=2), FixedPointRun(), None]


@pytest.mark.parametrize(
    "args",
    [
        ["--max-iterations", "5"],
        ["--until-stable", "--cycle-window", "1"],
        ["--until-stable", "--max-iterations", "0"],
    ],
)
def test_submit_with_bad_until_stable_bounds_exits_2(
    runner: CliRunner, service: FakeService, args: list[str]
) -> None:
    assert invoke(runner, "submit", "calc", "hi", *args).exit_code == EXIT_USAGE
    assert service.calls == []


# -- how jobs watch renders the events ------------------------------------------------------------------


def render(*data: JobEventData) -> str:
    buffer = io.StringIO()
    view = JobView(Console(file=buffer, width=200), awaiting_job(), RemoteAgent("ops", "process", "scripted"))

    async def feed() -> None:
        for seq, item in enumerate(data, 1):
            await view.job_event(
                JobEvent(job_id="j-wait", seq=seq, time=T0 + timedelta(seconds=seq), data=item)
            )

    asyncio.run(feed())
    view.stop()
    return buffer.getvalue()


def test_watch_renders_approvals_resumes_and_turn_controls() -> None:
    out = render(
        SandboxActivity(event=TurnSuspended(iteration=2, calls=CALLS)),
        ApprovalChanged(phase="requested", calls=CALLS),
        ApprovalChanged(
            phase="decided", decision=ApprovalDecision(approver="ana", approve=True, comment="ok", time=T0)
        ),
        ApprovalChanged(
            phase="decided",
            decision=ApprovalDecision(
                approver="policy", approve=False, comment="timed out", time=T0, automatic=True
            ),
        ),
        ApprovalChanged(phase="resolved", outcome="rejected"),
        JobResumed(
            resume=2, cause="lost", reason="the sandbox died", iteration=3, lost_calls=["t2 bash: re-run"]
        ),
        SandboxActivity(event=SignalDelivered(signal_type="budget", action="budget", detail="max_turns 3")),
        SandboxActivity(event=Checkpoint(messages_from=0, state={"iterations": 4})),
    )
    assert "suspended after model call 2: bash, http_get wait for approval" in out
    assert (
        'approval requested for bash {"big": 1152921504606846976, "command": "rm -rf out"} destructive' in out
    )
    assert "approval requested for http_get null" in out
    assert "decide with: airlock approve j-wait / airlock reject j-wait --reason TEXT" in out
    assert "approval ana approved: ok" in out
    assert "approval policy rejected (automatic): timed out" in out
    assert "approval resolved: rejected; the job resumes" in out
    assert "resume 2 (lost): the sandbox died; continuing after model call 3" in out
    assert "lost call t2 bash: re-run" in out
    assert "signal budget reached the turn: budget max_turns 3" in out
    assert "checkpoint (iteration 4)" in out


def test_awaiting_approval_state_has_its_colour() -> None:
    from airlock.cli._jobs import _STATE_COLOURS

    assert set(_STATE_COLOURS) == set(JobState)


def test_verify_names_a_truncated_thread_and_reports_its_anchors(
    runner: CliRunner, service: FakeService
) -> None:
    problem = (
        "thread j-boss: 2 records missing after #8 (anchor says 10, store holds 8): the thread was truncated"
    )
    service.reports["j-boss"] = ChainReport(
        ok=False,
        records=8,
        breaks=[ChainBreak(position=8, record_id="j-boss:10", problem=problem)],
        anchored=True,
        anchored_records=10,
    )
    result = invoke(runner, "jobs", "verify", "j-boss")
    assert result.exit_code == 1 and f"#8 j-boss:10: {problem}" in result.stdout.replace("\n", " ")
    body = invoke_json(runner, "jobs", "verify", "j-boss", code=1)
    assert body["anchored"] is True and body["anchored_records"] == 10 and body["records"] == 8
    service.reports["j-boss"] = ChainReport(
        ok=True, records=10, breaks=[], anchored=True, anchored_records=10
    )
    result = invoke(runner, "jobs", "verify", "j-boss")
    assert "chain intact: 10 records, hash chain only, every thread at its anchor" in result.stdout
