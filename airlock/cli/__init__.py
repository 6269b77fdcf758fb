"""The ``airlock`` command. Only this package imports typer and rich.

Structure: one typer app with a sub-app per noun (``images``, ``agents``, ``jobs``, ``store``,
``sandboxes``, ``keys``) and
top-level verbs (``run``, ``serve``, ``submit``, ``approve``, ``reject``, ``signal``,
``doctor``, ``gc``); the verbs' work lives in this package's private modules (``_run``,
``_jobs``, ``_governance``, ``_audit``, ``_serve``, ``_agents``, ``_doctor``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from airlock.cli._common import (
    EXIT_CODES_HELP,
    EXIT_USAGE,
    console,
    err_console,
    load,
    load_agent,
    report_error,
)
from airlock.cli._store import store_app
from airlock.cli._tls import client_tls_options
from airlock.errors import AirlockError, ConfigError
from airlock.jobs import JobState
from layer0 import Layer0Error

if TYPE_CHECKING:
    from pydantic import BaseModel

    from airlock.sandbox import Reaped

app = typer.Typer(
    name="airlock",
    help="airlock: run LLM agents inside real sandboxes.",
    no_args_is_help=True,
    add_completion=False,
)
app.callback()(client_tls_options)
images_app = typer.Typer(help="Build and inspect sandbox images.", no_args_is_help=True)
app.add_typer(images_app, name="images")
agents_app = typer.Typer(help="List and inspect the configured agents.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
jobs_app = typer.Typer(
    help="List, inspect, follow, steer, audit and cancel the jobs of a controller (airlock serve).",
    no_args_is_help=True,
)
app.add_typer(jobs_app, name="jobs")
app.add_typer(store_app, name="store")

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Configuration file or directory (default: $AIRLOCK_CONFIG, ./airlock.yaml, ./airlock.d/).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")]
AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="The controller: host:port or unix:/path (default: $AIRLOCK_CONTROLLER, else 127.0.0.1:7878).",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="The controller's bearer token (default: $AIRLOCK_TOKEN, else the token file in the "
        "default data dir, $AIRLOCK_DATA_DIR or ~/.local/state/airlock/controller).",
        show_default=False,
    ),
]
#: How ``submit --wait`` and ``jobs watch`` exit (here, not in ``_cli._jobs``: building the
#: app must not import the gRPC client).
JOB_EXIT_CODES_HELP = (
    "Exit codes: a job that finished its turn exits as `airlock run` does: 0 complete; 1 ended "
    "without completing (max_turns, budget, safety_stop, …); 4 the turn ended in error. A job that "
    "timed out (its --timeout / max_duration) exits 1; a failed job 3 when its sandbox could not be "
    "provided (provisioning, isolation, credentials, resources), else 4; an interrupted job (the "
    "controller stopped while it ran) 3; a cancelled job (airlock jobs cancel) 130. Ctrl-C while "
    "watching only stops watching (the job keeps running; cancel it with airlock jobs cancel ID) "
    "and exits 130. Controller errors: 2 unknown job or agent, invalid argument, a job not in the "
    "state the command needs, not an approver, missing or wrong token; 3 no controller at the address."
)


JobIdArgument = Annotated[str, typer.Argument(help="The job's id (see: airlock jobs ls).")]
InputsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--in",
        help="A file or directory placed in the sandbox's workspace before the turn, under its own "
        "name (repeatable; at most 200 files, 8 MiB in all).",
    ),
]
#: Controller errors of the verbs that steer a job (approve, jobs pause, …).
CONTROL_EXIT_CODES_HELP = (
    "Exit codes: 0 done; 2 unknown job, invalid argument, a job not in the state the command needs "
    "(not waiting for approval, no turn running or paused), not an approver, missing or wrong token; "
    "3 no controller at the address."
)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


@app.command(
    "run",
    help="Run AGENT once on MESSAGE in a fresh sandbox, with live progress, then print the answer "
    "and a summary.\n\n" + EXIT_CODES_HELP,
)
def run(
    agent: Annotated[str, typer.Argument(help="The agent's name (see: airlock agents ls).")],
    message: Annotated[str, typer.Argument(help="The user message for the turn.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Session id: the turn sees the session's earlier conversation, kept in the data "
            "dir's state store (as with airlock serve).",
        ),
    ] = None,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", min=1, help="Override the agent's max_turns.")
    ] = None,
    max_cost: Annotated[
        str | None, typer.Option("--max-cost", help="Override the agent's max_cost (USD, e.g. 0.50).")
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option("--timeout", help="Override the agent's max_duration (90s, 5m, 1h30m, or ms)."),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Where session histories and memory live (default: $AIRLOCK_DATA_DIR, else "
            "$XDG_STATE_HOME/airlock/controller or ~/.local/state/airlock/controller).",
        ),
    ] = None,
    step: Annotated[
        bool,
        typer.Option(
            "--step",
            help="Pause before the first model call and take commands on stdin, one per line: "
            "s runs exactly one model call and its tools, r resumes, i inspects the session. "
            "Without --step, typing p (then Enter) pauses a running turn.",
        ),
    ] = False,
    approve_as: Annotated[
        str | None,
        typer.Option(
            "--approve-as",
            help="The approver a y/n typed at the terminal decides as, for calls the agent's "
            "approval policy gates (default: your user name).",
        ),
    ] = None,
    inputs: InputsOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the job's artifacts (the files it leaves under its agent's artifact globs, "
            "default out/**) below this directory.",
        ),
    ] = None,
) -> None:
    """Run one job (see the command help for the exit codes)."""
    from airlock.cli._common import EXIT_CANCELLED
    from airlock.cli._run import RunOptions, run_agent

    try:
        airlock_config, agent_config = load_agent(config, agent)
        opts = RunOptions(
            message=message,
            session=session,
            max_turns=max_turns,
            max_cost=max_cost,
            timeout=timeout,
            as_json=as_json,
            data_dir=data_dir,
            step=step,
            approve_as=approve_as,
            inputs=tuple(inputs or ()),
            out=out,
        )
        run_agent(airlock_config, agent_config, opts)
    except KeyboardInterrupt:  # before or after the job's event loop (the job handles its own)
        err_console.print("[yellow]cancelled[/]")
        raise typer.Exit(EXIT_CANCELLED) from None


@app.command(
    "serve",
    help="Run the controller service in the foreground: a durable job queue (SQLite in the data "
    "dir), bounded workers each running a job in its agent's own sandbox, and an authenticated "
    "gRPC API for airlock submit / airlock jobs. On first start it generates a bearer token, "
    "saves it (mode 0600) in DATA_DIR/token and prints it once. Ctrl-C or SIGTERM stops it "
    "gracefully: running jobs' sandboxes are removed and each job resumes from its last "
    "checkpoint at the next start (interrupted when its agent allows no resume); queued jobs "
    "stay queued. Exit codes: 0 stopped; 2 configuration error; 3 cannot start "
    "(address in use, unreadable data dir or token file).",
)
def serve(
    config: ConfigOption = None,
    address: Annotated[
        str,
        typer.Option("--address", help="Where to listen: host:port (port 0 picks one) or unix:/path."),
    ] = "127.0.0.1:7878",
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Jobs, state and the token (default: $AIRLOCK_DATA_DIR, else "
            "$XDG_STATE_HOME/airlock/controller or ~/.local/state/airlock/controller).",
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Jobs running at once (one sandbox each).")
    ] = 4,
    max_follow_ups: Annotated[
        int,
        typer.Option(
            "--max-follow-ups", min=0, help="Delegate/handoff child jobs one submitted job may start."
        ),
    ] = 16,
    max_depth: Annotated[
        int, typer.Option("--max-depth", min=0, help="Levels of child jobs under a submitted job.")
    ] = 4,
    parallel_children: Annotated[
        int,
        typer.Option(
            "--parallel-children",
            min=1,
            help="Delegated child jobs of one job tree whose turns run at once.",
        ),
    ] = 4,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON document (address, data dir, agents, …) once listening."),
    ] = False,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="Run every agent's jobs on this sandbox backend (e.g. kubernetes), whatever its "
            "entry says; refused for an agent the backend cannot isolate as configured.",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            envvar="AIRLOCK_TOKEN_FILE",
            help="Use the bearer token in this existing file (e.g. a mounted Secret): never generated, "
            "never printed; missing, unreadable or empty exits 3. Followed while serving: a changed "
            "file's token applies from the next call (an emptied one keeps the last).",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            help="Serve the API with TLS: the server certificate chain (PEM); needs --tls-key. The "
            "files are followed: a rotated certificate applies from the next connection.",
        ),
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", help="The server certificate's key (PEM).")
    ] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-ca",
            help="Mutual TLS: only clients with a certificate from this CA (PEM) may connect.",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="AIRLOCK_STORE",
            show_default=False,
            help="Keep jobs, state and API keys in this PostgreSQL database "
            "(postgresql://user:password@host:port/db), shared by every controller replica that names "
            "it; default: SQLite files in the data dir (one controller). Prefer the environment "
            "variable: a password on the command line is visible to other users.",
        ),
    ] = None,
    lease: Annotated[
        float,
        typer.Option(
            "--lease",
            min=1.0,
            help="Seconds a replica that stopped renewing its lease (killed, paused, cut off) still "
            "holds its jobs before another replica adopts them.",
        ),
    ] = 15.0,
    audit_key_file: Annotated[
        Path | None,
        typer.Option(
            "--audit-key-file",
            envvar="AIRLOCK_AUDIT_KEY_FILE",
            help="Seal the turn records with the audit key in this existing file (hex, at least 32 "
            "bytes: openssl rand -hex 32; mode 0600/0400, or root's 0640/0440 as a mounted Secret) "
            "instead of <data dir>/audit.key: replicas sharing a --store share it, so each verifies "
            "the others' records. Missing, short or open to others exits 2.",
        ),
    ] = None,
    blob_store: Annotated[
        str,
        typer.Option(
            "--blob-store",
            envvar="AIRLOCK_BLOB_STORE",
            help="Where jobs' workspace snapshots keep their files: 'dir' (<data dir>/blobs), "
            "'dir:/path', s3://bucket/prefix (S3-compatible storage through boto3; the endpoint "
            "from $AIRLOCK_S3_ENDPOINT, credentials from the standard AWS variables), or 'off' "
            "(no workspace snapshots: a resumed job starts with its input files only). Replicas "
            "sharing a --store need a shared one: s3://, or a directory they all mount.",
        ),
    ] = "dir",
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            help="The process log on stderr: text lines, or one JSON object a line (time, level, "
            "logger, message, and the job id, agent, tenant and trace id when known).",
        ),
    ] = "text",
    metrics_address: Annotated[
        str | None,
        typer.Option(
            "--metrics-address",
            help="Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464).",
        ),
    ] = None,
    http_address: Annotated[
        str | None,
        typer.Option(
            "--http-address",
            show_default=False,
            help="Serve the HTTP/JSON API (and its OpenAPI document at /api/v1/openapi.json) on "
            "host:port, with the gRPC API's credentials, and HTTPS with --tls-cert; 'off' for none. "
            "Default: 127.0.0.1:8480 (skipped with a warning when in use).",
        ),
    ] = None,
) -> None:
    """Run the controller service (see the command help)."""
    from airlock.cli._serve import ServeOptions
    from airlock.cli._serve import serve as run_serve

    if log_format not in ("text", "json"):
        report_error(ConfigError(f"--log-format is text or json, not {log_format!r}"))
    opts = ServeOptions(
        address=address,
        data_dir=data_dir,
        concurrency=concurrency,
        max_follow_ups=max_follow_ups,
        max_depth=max_depth,
        parallel_children=parallel_children,
        as_json=as_json,
        token_file=token_file,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
        store=store,
        lease_s=lease,
        audit_key_file=audit_key_file,
        blob_store=blob_store,
        log_format="json" if log_format == "json" else "text",
        metrics_address=metrics_address,
        http_address=http_address,
    )
    loaded = load(config)
    if backend is not None:
        try:
            loaded = loaded.on_backend(backend)
        except ConfigError as e:
            report_error(e)
    run_serve(loaded, opts)


@app.command(
    "submit",
    help="Submit a job for AGENT with MESSAGE to the controller (airlock serve) and print its id. "
    "With --wait, follow it with live progress, then print the answer and a summary.\n\n"
    + JOB_EXIT_CODES_HELP,
)
def submit(
    agent: Annotated[str, typer.Argument(help="The agent's name (as configured on the controller).")],
    message: Annotated[str, typer.Argument(help="The user message for the turn.")],
    session: Annotated[
        str | None,
        typer.Option("--session", help="Session id: the turn sees the session's history; one job at a time."),
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", help="Fair-queue key (default: the agent's name).")
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            help="Limit on the job's whole life (90s, 5m, 1h30m, or ms); default: the agent's "
            "max_duration plus a minute.",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the job until it ends (Ctrl-C stops watching, not the job)."),
    ] = False,
    until_stable: Annotated[
        bool,
        typer.Option(
            "--until-stable",
            help="Re-run the agent on its own output until it is stable: the output equals its input, "
            "repeats one of the last --cycle-window outputs, or --max-iterations ran.",
        ),
    ] = False,
    max_iterations: Annotated[
        int | None,
        typer.Option(
            "--max-iterations", min=1, max=1000, help="With --until-stable: at most this many runs [10]."
        ),
    ] = None,
    cycle_window: Annotated[
        int | None,
        typer.Option(
            "--cycle-window", min=2, max=1000, help="With --until-stable: outputs compared for a cycle [3]."
        ),
    ] = None,
    inputs: InputsOption = None,
    sandbox: Annotated[
        str | None,
        typer.Option(
            "--sandbox",
            help="Run in this long-lived sandbox (airlock sandboxes create), after the jobs before it, "
            "in the same workspace.",
        ),
    ] = None,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a job (see the command help for the exit codes)."""
    from airlock.cli._jobs import SubmitOptions, Target
    from airlock.cli._jobs import submit as submit_job

    if not until_stable and (max_iterations is not None or cycle_window is not None):
        raise _fail("--max-iterations and --cycle-window need --until-stable", EXIT_USAGE)
    opts = SubmitOptions(
        agent=agent,
        message=message,
        session=session,
        queue=queue,
        timeout=timeout,
        wait=wait,
        as_json=as_json,
        until_stable=(max_iterations or 10, cycle_window or 3) if until_stable else None,
        inputs=tuple(inputs or ()),
        sandbox=sandbox,
    )
    submit_job(Target(address, token), opts)


@jobs_app.command("ls")
def jobs_ls(
    state: Annotated[
        list[JobState] | None,
        typer.Option("--state", help="Only jobs in this state (repeatable).", case_sensitive=False),
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's jobs.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Only this session's jobs.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most this many jobs.")] = 50,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs, most recent first: id, agent, state, origin, created, duration, exit reason."""
    from airlock.cli._jobs import Target
    from airlock.cli._jobs import jobs_ls as list_jobs

    list_jobs(
        Target(address, token),
        states=state or [],
        agent=agent,
        session=session,
        limit=limit,
        as_json=as_json,
    )


@jobs_app.command("artifacts")
def jobs_artifacts(
    job_id: JobIdArgument,
    download: Annotated[
        Path | None,
        typer.Option("--download", help="Write every artifact below this directory, at its workspace path."),
    ] = None,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a job's artifacts (path, size, SHA-256), or download them."""
    from airlock.cli._jobs import Target, jobs_artifacts_verb

    jobs_artifacts_verb(Target(address, token), job_id, download, as_json)


@jobs_app.command("show")
def jobs_show(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a job: every field, its children, its error, its effects and its answer."""
    from airlock.cli._jobs import Target
    from airlock.cli._jobs import jobs_show as show_job

    show_job(Target(address, token), job_id, as_json)


@jobs_app.command(
    "watch",
    help="Follow a job with live progress (a finished one is replayed), then "
    "print its answer and a summary; with --json, one JSON object per event as it arrives, "
    "then one with the job and its summary.\n\n" + JOB_EXIT_CODES_HELP,
)
def jobs_watch(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Follow a job (see the command help for the exit codes)."""
    from airlock.cli._jobs import Target
    from airlock.cli._jobs import jobs_watch as watch_job

    watch_job(Target(address, token), job_id, as_json)


@jobs_app.command("logs")
def jobs_logs(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a job's log lines: time, level, source (controller, turn, agent), message."""
    from airlock.cli._jobs import Target
    from airlock.cli._jobs import jobs_logs as job_logs

    job_logs(Target(address, token), job_id, as_json)


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: JobIdArgument,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (recorded on the job).")] = None,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a queued or running job; its sandbox is removed before this returns."""
    from airlock.cli._jobs import Target
    from airlock.cli._jobs import jobs_cancel as cancel_job

    cancel_job(Target(address, token), job_id, reason, as_json)


@jobs_app.command("fork")
def jobs_fork(
    job_id: JobIdArgument,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="A checkpoint number, or a record of the job's thread (JOB:n: the first checkpoint "
            "at or after it). Default: its last checkpoint.",
        ),
    ] = None,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="Continue the conversation with this message.")
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Run the fork under this agent.")] = None,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a new job from a job's conversation and workspace at one of its checkpoints (a branch
    of its weave; the original is untouched)."""
    from airlock.cli._jobs import Target
    from airlock.cli._jobs import jobs_fork as fork_job

    fork_job(Target(address, token), job_id, at, message, agent, as_json)


@jobs_app.command(
    "pause", help="Pause a job's running turn at its next step boundary.\n\n" + CONTROL_EXIT_CODES_HELP
)
def jobs_pause(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pause a job's turn (see the command help)."""
    from airlock.cli._governance import control
    from airlock.cli._jobs import Target

    control(Target(address, token), job_id, "pause", as_json)


@jobs_app.command("resume", help="Let a job's paused turn run on.\n\n" + CONTROL_EXIT_CODES_HELP)
def jobs_resume(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Resume a paused turn (see the command help)."""
    from airlock.cli._governance import control
    from airlock.cli._jobs import Target

    control(Target(address, token), job_id, "resume", as_json)


@jobs_app.command(
    "step",
    help="Run exactly one step (one model call and the tools it asks for) of a paused turn, then print "
    "what it did: the model's text, the tools run, and the events the job recorded.\n\n"
    + CONTROL_EXIT_CODES_HELP,
)
def jobs_step(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Step a paused turn (see the command help)."""
    from airlock.cli._governance import step
    from airlock.cli._jobs import Target

    step(Target(address, token), job_id, as_json)


@jobs_app.command(
    "inspect",
    help="Show a job's session as of its latest checkpoint: iterations, tokens, cost, tool calls, the "
    "messages, the calls not finished (or waiting for approval), and whether the turn runs or is paused.",
)
def jobs_inspect(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Inspect a job's session (see the command help)."""
    from airlock.cli._governance import inspect
    from airlock.cli._jobs import Target

    inspect(Target(address, token), job_id, as_json)


@jobs_app.command(
    "audit",
    help="Show the turn records of a job's tree as a timeline per job, delegated jobs under their "
    "parent. Each record: its Lamport clock, #n in its job's thread, type, kind, what happened, tokens "
    "and cost, and the records it depends on (#n in the same job, else JOB:n).",
)
def jobs_audit(
    job_id: JobIdArgument,
    thoughts: Annotated[
        bool, typer.Option("--thoughts", help="Also show THOUGHT records (model text before tool calls).")
    ] = False,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the turn records as one JSON list instead of a tree.")
    ] = False,
) -> None:
    """Audit a job tree's records (see the command help)."""
    from airlock.cli._audit import audit
    from airlock.cli._jobs import Target

    audit(Target(address, token), job_id, thoughts=thoughts, as_json=as_json)


@jobs_app.command(
    "verify",
    help="Check the hash chain of a job tree's turn records (and their seals, when the controller "
    "has an audit key). Exit codes: 0 intact; 1 broken (each problem is listed); 2 unknown job, "
    "missing or wrong token; 3 no controller at the address.",
)
def jobs_verify(
    job_id: JobIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify a job tree's records (see the command help)."""
    from airlock.cli._audit import verify
    from airlock.cli._jobs import Target

    verify(Target(address, token), job_id, as_json)


@jobs_app.command(
    "prune",
    help="Remove finished jobs now (administrators): each root job finished before the cutoff, "
    "with its whole tree, events, artifacts and turn records. A job not yet finished, or a child "
    "whose root is not due, is never removed. Without --older-than, the controller's retention "
    "(retention.finished_jobs, a tenant's own) decides. Audited.",
)
def jobs_prune(
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Finished longer ago than this: 30s, 15m, 12h, 30d.")
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's jobs.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would go; remove nothing.")] = False,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Prune finished jobs (see the command help)."""
    from airlock.cli._jobs import Target
    from airlock.cli._prune import prune

    seconds = _span_s(older_than, "--older-than")
    prune(Target(address, token), older_than_s=seconds, tenant=tenant, dry_run=dry_run, as_json=as_json)


sandboxes_app = typer.Typer(
    help="Long-lived sandboxes: one box kept for several jobs run one after another in the same "
    "workspace (airlock submit --sandbox ID); pause snapshots it and removes the box, resume restores it.",
    no_args_is_help=True,
)
app.add_typer(sandboxes_app, name="sandboxes")
SandboxIdArgument = Annotated[str, typer.Argument(help="The sandbox's id (sbx-…).")]


@sandboxes_app.command("create")
def sandboxes_create(
    agent: Annotated[str, typer.Argument(help="The agent (its policy is fixed to the sandbox).")],
    ttl: Annotated[
        str | None, typer.Option("--ttl", help="Remove it once idle this long (30s, 15m, 12h, 2d).")
    ] = None,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a long-lived sandbox of AGENT (its box started) and print its id."""
    from airlock.cli._jobs import Target
    from airlock.cli._sandboxes import sandboxes_create as create

    create(Target(address, token), agent, _span_s(ttl, "--ttl"), as_json)


@sandboxes_app.command("ls")
def sandboxes_ls(
    address: AddressOption = None, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """List your tenant's sandboxes, newest first."""
    from airlock.cli._jobs import Target
    from airlock.cli._sandboxes import sandboxes_ls as listed

    listed(Target(address, token), as_json)


@sandboxes_app.command("pause")
def sandboxes_pause(
    sandbox_id: SandboxIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Snapshot a sandbox's workspace, then remove its box (after the job running in it)."""
    from airlock.cli._jobs import Target
    from airlock.cli._sandboxes import sandbox_action

    sandbox_action(Target(address, token), sandbox_id, "pause", as_json)


@sandboxes_app.command("resume")
def sandboxes_resume(
    sandbox_id: SandboxIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a fresh box for a paused sandbox, its workspace restored from the snapshot."""
    from airlock.cli._jobs import Target
    from airlock.cli._sandboxes import sandbox_action

    sandbox_action(Target(address, token), sandbox_id, "resume", as_json)


@sandboxes_app.command("rm")
def sandboxes_rm(
    sandbox_id: SandboxIdArgument,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a sandbox: its box, and the sandbox itself (after the job running in it)."""
    from airlock.cli._jobs import Target
    from airlock.cli._sandboxes import sandbox_action

    sandbox_action(Target(address, token), sandbox_id, "remove", as_json)


keys_app = typer.Typer(
    help="API keys of the controller's principals (administrators): create, list, revoke.",
    no_args_is_help=True,
)
app.add_typer(keys_app, name="keys")

_SPANS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _span_s(text: str | None, option: str) -> float | None:
    """``30s``, ``15m``, ``12h``, ``90d`` as seconds (None: not given); exits 2 otherwise."""
    if text is None:
        return None
    number, unit = text[:-1], text[-1:]
    if unit not in _SPANS or not number.isdigit() or int(number) <= 0:
        raise _fail(
            f"{option} {text!r}: give a positive whole number and s, m, h or d (e.g. 90d)", EXIT_USAGE
        )
    return int(number) * _SPANS[unit]


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Argument(help="The principal the key authenticates as.")],
    tenant: Annotated[str, typer.Option("--tenant", help="The principal's tenant.", show_default=False)],
    roles: Annotated[
        list[str],
        typer.Option(
            "--role", help="A role (repeatable): submitter, viewer, approver, admin, or auth.roles'."
        ),
    ],
    ttl: Annotated[
        str | None, typer.Option("--ttl", help="Valid for this long (e.g. 90d; default: until revoked).")
    ] = None,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API key; its secret is printed once (stdout) and stored only as a salted hash."""
    from airlock.cli._identity import create_key
    from airlock.cli._jobs import Target

    create_key(Target(address, token), name, tenant, roles, _span_s(ttl, "--ttl"), as_json)


@keys_app.command("ls")
def keys_ls(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys.")] = None,
    include_revoked: Annotated[bool, typer.Option("--all", help="Revoked keys too.")] = False,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """The API keys, newest first (never their secrets)."""
    from airlock.cli._identity import list_keys
    from airlock.cli._jobs import Target

    list_keys(Target(address, token), tenant, include_revoked, as_json)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (12 hex digits; see: airlock keys ls).")],
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke an API key: its next call is refused."""
    from airlock.cli._identity import revoke_key
    from airlock.cli._jobs import Target

    revoke_key(Target(address, token), key_id, as_json)


@app.command("whoami")
def whoami(address: AddressOption = None, token: TokenOption = None, as_json: JsonOption = False) -> None:
    """The principal your credential authenticates as: tenant, roles, permissions."""
    from airlock.cli._identity import whoami as show
    from airlock.cli._jobs import Target

    show(Target(address, token), as_json)


@app.command("tenants")
def tenants(address: AddressOption = None, token: TokenOption = None, as_json: JsonOption = False) -> None:
    """Each tenant's use against its quotas (administrators see every tenant; others their own)."""
    from airlock.cli._identity import tenants as show
    from airlock.cli._jobs import Target

    show(Target(address, token), as_json)


@app.command("audit")
def audit(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's entries.")] = None,
    principal: Annotated[str | None, typer.Option("--principal", help="Only this principal's.")] = None,
    action: Annotated[
        str | None, typer.Option("--action", help="Only this call (SubmitJob, ApproveJob, CreateKey, …).")
    ] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only the last 30m, 12h, 7d, …")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100000, help="At most this many.")] = 100,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """The audit log of state-changing calls (submit, cancel, approve, reject, signal, keys),
    newest first: principal, tenant, time, peer address and outcome."""
    from datetime import UTC, datetime, timedelta

    from airlock.cli._identity import audit as show
    from airlock.cli._jobs import Target

    span = _span_s(since, "--since")
    start = datetime.now(UTC) - timedelta(seconds=span) if span is not None else None
    show(
        Target(address, token),
        tenant=tenant,
        principal=principal,
        action=action,
        since=start,
        limit=limit,
        as_json=as_json,
    )


@app.command("status")
def status(address: AddressOption = None, token: TokenOption = None, as_json: JsonOption = False) -> None:
    """What a running controller proved about its backends' network isolation (Kubernetes:
    whether the cluster enforces NetworkPolicy in the sandbox namespace, with each check); exit 1
    when jobs are refused because it failed or is unproven."""
    from airlock.cli._jobs import Target
    from airlock.cli._status import controller_status

    controller_status(Target(address, token), as_json)


@app.command(
    "approve",
    help="Approve, as the principal your credential authenticates (see: airlock whoami), the tool "
    "calls a job waits for (its state: awaiting_approval). The job resumes once "
    "its agent's strategy is met (any: this approval; all: every approver's; majority: more than "
    "half).\n\n" + CONTROL_EXIT_CODES_HELP,
)
def approve(
    job_id: JobIdArgument,
    comment: Annotated[str, typer.Option("--comment", help="Why (recorded with the decision).")] = "",
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve a job's waiting calls (see the command help)."""
    from airlock.cli._governance import decide
    from airlock.cli._jobs import Target

    decide(Target(address, token), job_id, approve=True, comment=comment, as_json=as_json)


@app.command(
    "reject",
    help="Reject the tool calls a job waits for; the model reads the reason and the job resumes "
    "without running them. One rejection settles it under the strategies any and all (majority: "
    "once more than half can no longer approve).\n\n" + CONTROL_EXIT_CODES_HELP,
)
def reject(
    job_id: JobIdArgument,
    reason: Annotated[str, typer.Option("--reason", help="Why (the model reads it).", show_default=False)],
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reject a job's waiting calls (see the command help)."""
    from airlock.cli._governance import decide
    from airlock.cli._jobs import Target

    if not reason.strip():
        raise _fail("--reason must not be empty (the model reads it)", EXIT_USAGE)
    decide(Target(address, token), job_id, approve=False, comment=reason, as_json=as_json)


@app.command(
    "signal",
    help="Send a signal to a workflow (a job's id, unless it was submitted with another): it is "
    "recorded for the workflow and delivered into its running turns at their next step boundary. "
    "TYPE cancel ends them; budget changes their limits (--data '{\"max_turns\": 3}'); any other type "
    "is feedback the model reads.\n\nExit codes: 0 sent; 2 invalid --data or argument, missing or "
    "wrong token; 3 no controller at the address.",
)
def signal(
    workflow: Annotated[str, typer.Argument(help="The workflow (default of a job: its id).")],
    signal_type: Annotated[str, typer.Argument(metavar="TYPE", help="cancel, budget, or a feedback type.")],
    data: Annotated[str | None, typer.Option("--data", help="The signal's data, as JSON.")] = None,
    address: AddressOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Signal a workflow (see the command help)."""
    from airlock.cli._governance import signal as send_signal
    from airlock.cli._jobs import Target

    send_signal(Target(address, token), workflow, signal_type, data, as_json)


@agents_app.command("ls")
def agents_ls(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List the agents: backend, provider/model, tools, network, credentials, resources."""
    from airlock.cli._agents import agents_ls as list_agents

    list_agents(load(config), as_json=as_json)


@agents_app.command("show")
def agents_show(
    agent: Annotated[str, typer.Argument(help="The agent's name.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe",
            help="Also start or connect to the agent's MCP servers from this machine and list the tools "
            "each offers (stdio servers run here, in an empty temporary directory with PATH/HOME/LANG "
            "only; http servers are reached directly, not through the sandbox's egress proxy); exit 1 "
            "if one is unusable.",
        ),
    ] = False,
) -> None:
    """Show an agent's effective sandbox policy: spec, its MCP servers, isolation, egress,
    credentials, limits, and what its backend creates for it (on Kubernetes: its NetworkPolicies)."""
    from airlock.cli._agents import agents_show as show_agent

    loaded, agent_config = load_agent(config, agent)
    settings = loaded.settings_of(agent_config.backend)
    show_agent(agent_config, as_json=as_json, settings=settings, probe=probe)


@app.command("doctor")
def doctor(
    config: ConfigOption = None,
    as_json: JsonOption = False,
    backend: Annotated[
        str | None, typer.Option("--backend", help="Check only this sandbox backend (e.g. kubernetes).")
    ] = None,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe",
            help="Also run the backend's proof of isolation on a live deployment (Kubernetes: the Helm "
            "release's isolation test: jobs under a deny-all and an allow-list agent must reach nothing "
            "forbidden and never see a sidecar secret).",
        ),
    ] = False,
    release: Annotated[
        str, typer.Option("--release", metavar="[NAMESPACE/]NAME", help="The deployment --probe tests.")
    ] = "airlock/airlock",
) -> None:
    """Check this machine: Docker engine, runner image, gvisor/kata runtimes, local model, config.

    Exit code 0 when no check is an error (warnings are fine), 1 otherwise; 2 for a backend
    that does not exist or cannot --probe.
    """
    from airlock.cli._doctor import doctor as run_doctor
    from airlock.sandbox import backend as backend_named
    from airlock.sandbox import backend_names

    if backend is not None and backend not in backend_names():
        raise _fail(f"unknown backend {backend!r}; backends: {', '.join(backend_names())}", EXIT_USAGE)
    if probe and (backend is None or backend_named(backend).probe is None):
        able = [n for n in backend_names() if backend_named(n).probe is not None]
        raise _fail(f"--probe needs --backend naming one of: {', '.join(able)}", EXIT_USAGE)
    raise typer.Exit(run_doctor(config, as_json=as_json, backend=backend, probe=release if probe else None))


@images_app.command("build")
def images_build(
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild even if current; refresh the cached wheels.")
    ] = False,
    source: Annotated[
        Path | None, typer.Option("--source", help="The airlock source tree (default: this checkout).")
    ] = None,
    image: Annotated[
        list[str] | None,
        typer.Option(
            "--image",
            help="Build only this image: runner (what sandboxes run) or controller (airlock serve, for a "
            "cluster). Repeatable; default: both.",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="NAME",
            help="Build a custom sandbox image NAME instead: the runner image plus the packages of "
            "--requirements and --wheel (for agents with custom tools; name it in the agent's "
            "`isolation: [{type: container, image: NAME}]`).",
        ),
    ] = None,
    requirements: Annotated[
        Path | None,
        typer.Option(
            "--requirements",
            "-r",
            metavar="FILE",
            help="With --name: a requirements file (requirements by name).",
        ),
    ] = None,
    wheel: Annotated[
        list[Path] | None,
        typer.Option(
            "--wheel", metavar="FILE", help="With --name: a local wheel file to install. Repeatable."
        ),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            metavar="IMAGE",
            help="With --name: the runner image to build on (default: airlock-runner:<version>).",
        ),
    ] = None,
    find_links: Annotated[
        list[Path] | None,
        typer.Option(
            "--find-links",
            metavar="DIR",
            help="With --name: also look for wheels in this directory. Repeatable.",
        ),
    ] = None,
    no_index: Annotated[
        bool, typer.Option("--no-index", help="With --name: download from --find-links only, no index.")
    ] = False,
    dockerfile: Annotated[
        bool,
        typer.Option(
            "--dockerfile",
            help="With --name: print the equivalent Dockerfile (FROM the runner image, for a registry) and "
            "build nothing.",
        ),
    ] = False,
) -> None:
    """Build the runner and controller images offline (Debian packages + wheels; no registry). Needs root.

    With --name: build a custom sandbox image on the local runner image instead (its wheels are
    downloaded on this host for the image's platform and installed with no network).
    """
    from airlock.images import RECIPES, build_image

    custom_only = {
        "--requirements": requirements is not None,
        "--wheel": bool(wheel),
        "--base": base is not None,
        "--find-links": bool(find_links),
        "--no-index": no_index,
        "--dockerfile": dockerfile,
    }
    if name is not None:
        if image or source is not None:
            raise _fail("--name builds a custom image; --image and --source build airlock's own", EXIT_USAGE)
        from airlock.cli._images import build_custom

        options = [
            *(a for d in find_links or [] for a in ("--find-links", str(d))),
            *(["--no-index"] if no_index else []),
        ]
        raise typer.Exit(
            build_custom(
                name,
                requirements=requirements,
                wheels=wheel or [],
                base=base,
                pip_options=options,
                force=force,
                dockerfile=dockerfile,
            )
        )
    if given := [flag for flag, used in custom_only.items() if used]:
        raise _fail(f"{', '.join(given)} go(es) with --name (a custom sandbox image)", EXIT_USAGE)
    names = image or list(RECIPES)
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        raise _fail(f"unknown image {', '.join(unknown)}; images: {', '.join(RECIPES)}", EXIT_USAGE)
    for name in dict.fromkeys(names):
        try:
            with console.status(f"building the {name} image", spinner="dots") as status:

                def step(message: str) -> None:
                    status.update(message)
                    console.log(message)

                report = asyncio.run(build_image(RECIPES[name], force=force, source=source, on_step=step))
        except (AirlockError, Layer0Error) as e:
            raise _fail(str(e)) from e
        from airlock.cli._images import print_build

        print_build(report)


@images_app.command("push")
def images_push(
    registry: Annotated[
        str,
        typer.Argument(
            metavar="REGISTRY",
            help="Where to push: HOST, HOST:PORT or HOST/PATH, e.g. registry.example.com/team "
            "(docker login first).",
        ),
    ],
    image: Annotated[
        list[str] | None,
        typer.Option(
            "--image", help="Push only this image: runner or controller. Repeatable; default: both."
        ),
    ] = None,
    tag: Annotated[
        str | None,
        typer.Option("--tag", help="The local tag to push (default: this airlock's version)."),
    ] = None,
) -> None:
    """Tag the runner and controller images under REGISTRY and push them; print each as
    REGISTRY/NAME@sha256:... (pin these in the chart's image.digest values).

    Exit codes: 0 pushed; 1 a push failed (an image missing, the registry refused it); 2 bad arguments.
    """
    from airlock.cli._images import push

    raise typer.Exit(push(registry, image or [], tag))


@app.command("probe")
def probe(
    allowed_url: Annotated[
        str, typer.Option("--allowed-url", help="The allow-list agent's one destination (served here).")
    ],
    canary_file: Annotated[
        Path, typer.Option("--canary-file", help="The allow-list agent's sidecar secret.")
    ],
    self_ip: Annotated[
        str, typer.Option("--self-ip", help="This pod's IP (the downward API's status.podIP).")
    ],
    deny_agent: Annotated[str, typer.Option("--deny-agent")] = "airlock-probe-deny",
    allow_agent: Annotated[str, typer.Option("--allow-agent")] = "airlock-probe-allow",
    allowed_port: Annotated[int, typer.Option("--allowed-port", min=1, max=65535)] = 8080,
    forbidden_port: Annotated[int, typer.Option("--forbidden-port", min=1, max=65535)] = 8081,
    canary_header: Annotated[str, typer.Option("--canary-header")] = "x-airlock-probe",
    sandbox_namespace: Annotated[
        str | None, typer.Option("--sandbox-namespace", help="Find the other sandbox's pods here.")
    ] = None,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target", metavar="NAME=HOST:PORT", help="A destination no sandbox may reach (repeat)."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds for each job.")] = 300.0,
    serve_config: Annotated[
        Path | None,
        typer.Option(
            "--serve-config",
            help="Serve this configuration's probe agents in this process for the probe's run "
            "(instead of --controller): no probe agent stands in a production controller.",
        ),
    ] = None,
    controller: Annotated[
        str | None, typer.Option("--controller", metavar="HOST:PORT", help="A controller's jobs API.")
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="That controller's bearer token (a mounted Secret).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Prove a deployment's isolation: jobs under a deny-all and an allow-list agent must reach
    nothing forbidden (another sandbox, the controller, the API server, the node, the metadata
    address, a port outside the allow-list) and never see the sidecar secret. What the Helm
    chart's `helm test` runs (with --serve-config: the probe agents exist only while it runs).

    Exit codes: 0 isolation holds; 1 a hole; 2 bad arguments or missing agents; 3 the
    controller or a job failed.
    """
    from airlock.cli._probe import parse_targets, read_inputs
    from airlock.cli._probe import probe as run_probe
    from airlock.probe.client import ProbeError, ProbeOptions

    try:
        token, canary = read_inputs(controller, token_file, serve_config, canary_file)
        opts = ProbeOptions(
            controller=controller or "",
            token=token,
            deny_agent=deny_agent,
            allow_agent=allow_agent,
            allowed_url=allowed_url,
            canary=canary,
            canary_header=canary_header,
            self_ip=self_ip,
            allowed_port=allowed_port,
            forbidden_port=forbidden_port,
            targets=parse_targets(target or []),
            sandbox_namespace=sandbox_namespace,
            timeout_s=timeout,
        )
    except ProbeError as e:
        raise _fail(str(e), e.exit_code) from None
    raise typer.Exit(run_probe(opts, as_json=as_json, serve_config=serve_config))


@app.command("gc")
def gc(
    all_: Annotated[
        bool,
        typer.Option("--all", help="Also remove sandboxes whose owner is still running."),
    ] = False,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Control directories' parent.")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="Sweep only this backend (default: every backend that leaves any)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Remove orphaned sandboxes (containers, networks, pods, policies, secrets, control dirs)
    whose owner is gone; a configuration, when found, says where each backend's live."""
    from airlock.sandbox import backend as sandbox_backend
    from airlock.sandbox import backends

    try:
        chosen = [sandbox_backend(backend)] if backend is not None else list(backends())
    except Layer0Error as e:
        report_error(e)
    settings = _configured_settings(config)

    async def sweep() -> list[tuple[str, Reaped | None]]:
        return [
            (b.name, await b.reap(state_dir, include_live=all_, settings=settings.get(b.name)))
            for b in chosen
            if b.reap
        ]

    removed, failed = 0, False
    for name, report in asyncio.run(sweep()):
        if report is None:
            err_console.print(f"[red]error:[/] {name}: its engine is unreachable; nothing swept")
            failed = True
            continue
        for kind, item in report.items():
            console.print(f"removed {kind} {item}")
        removed += report.removed
        for problem in report.errors:
            err_console.print(f"[yellow]warning:[/] {problem}")
        failed = failed or bool(report.errors)
    if not removed:
        console.print("nothing to remove")
    if failed:
        raise typer.Exit(1)


def _configured_settings(config: Path | None) -> dict[str, BaseModel]:
    """The backends' settings of the configuration (none found: every backend's defaults)."""
    from airlock.config import find_config

    try:
        find_config(config)
    except ConfigError as e:
        if config is not None:
            report_error(e)
        return {}
    return dict(load(config).backend_settings)


def main() -> None:
    """Entry point of the ``airlock`` console script."""
    app()


if __name__ == "__main__":
    main()
