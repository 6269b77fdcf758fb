"""The offline default at work: ten small tasks for the local model, each checked by a program.

Each task runs through ``airlock run --json`` exactly as a user runs it: an agent of
``examples/airlock.yaml`` (``offline-coder``: bash, read_file, write_file; ``demo``: the
calculator) in a real Docker sandbox whose only way out is the local model server
(Qwen2.5-Coder-1.5B on llama.cpp). What the task needs goes in with ``--in``; what it leaves
comes back with ``--out``. A task passes when its check, a program, accepts the answer and the
files: never by reading the answer by eye. Files the model wrote are only ever run in a
throwaway container (no network, read-only), never on this machine.

The benchmark starts one model server for the whole battery (``airlock run`` reuses it), so
the server's switches apply to every task and the prompt cache carries over:

- ``--grammar on|off``: tool calls constrained by a llama.cpp grammar built from the offered
  tools' schemas (the server's default: on);
- ``--trim on|off``: schemas shown to the model without titles, ``additionalProperties``,
  null defaults and long descriptions (default: on).

Columns: task, passed (runs passed / runs), turns (median), tool calls that ran / that were
refused (unknown tool or input outside the schema; ``echo``: refused calls whose arguments
were a JSON schema), the median seconds of a run, and why the last failing run failed.
The last line: tasks passing in at least 2 of 3 runs, and the median seconds per task.

Usage: ``python bench/local_model_tasks.py [--runs 3] [--task NAME ...] [--grammar on|off]
[--trim on|off] [--json PATH] [--markdown]`` (needs Docker, ``airlock images build`` and the
model, which the first run of the demo fetches). Exit status 1 when a run failed outright
(``airlock run`` could not run it), not when the model failed a task.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "airlock.yaml"
#: Seconds one ``airlock run`` may take before the benchmark gives up on it.
RUN_TIMEOUT_S = 600


@dataclass(frozen=True)
class Run:
    """What one ``airlock run`` of a task produced."""

    answer: str
    summary: dict[str, Any]
    #: Where ``--out`` wrote the artifacts (workspace paths below it).
    out: Path
    seconds: float
    #: ``airlock run``'s exit status.
    exit_code: int


#: A check: None when the run did the task, else why not (one line).
Check = Callable[[Run], "str | None"]


@dataclass(frozen=True)
class Task:
    """One small job and the program that decides whether it was done."""

    name: str
    message: str
    check: Check
    agent: str = "offline-coder"
    #: Files placed in the workspace (path relative to it -> text).
    inputs: dict[str, str] = field(default_factory=dict)


# -- checks --------------------------------------------------------------------------------


def _numbers(text: str) -> list[str]:
    """The numbers written in ``text``, thousands separators removed (``6,765`` -> ``6765``)."""
    return [n.replace(",", "") for n in re.findall(r"-?\d[\d,]*(?:\.\d+)?", text)]


def _same_number(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def answer_has_number(value: str) -> Check:
    """A number in the answer equals ``value`` (``295``, ``295.0`` and ``295.00`` alike)."""

    def check(run: Run) -> str | None:
        if any(_same_number(n, value) for n in _numbers(run.answer)):
            return None
        return f"the answer does not say {value}"

    return check


def answer_has(*words: str) -> Check:
    def check(run: Run) -> str | None:
        missing = [w for w in words if w.lower() not in run.answer.lower()]
        return f"the answer does not name {', '.join(missing)}" if missing else None

    return check


def used_tool(name: str, then: Check) -> Check:
    """``then``, and the tool ``name`` actually ran (the model did not guess)."""

    def check(run: Run) -> str | None:
        if not run.summary.get("tools_called", {}).get(name):
            return f"{name} was never called"
        return then(run)

    return check


def all_of(*checks: Check) -> Check:
    def check(run: Run) -> str | None:
        for c in checks:
            if (why := c(run)) is not None:
                return why
        return None

    return check


def sandboxed_python(out: Path, argv: Sequence[str]) -> tuple[int, str]:
    """Run ``python3 argv`` on the returned files in a throwaway runner container (no network,
    read-only, non-root): (exit status, stdout + stderr)."""
    from airlock.images import runner_image_tag

    cmd = [
        "docker", "run", "--rm", "--network", "none", "--read-only", "--user", "65534:65534",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--memory", "256m",
        "--pids-limit", "64", "--label", "airlock.bench=local-model-tasks",
        "-e", "PYTHONDONTWRITEBYTECODE=1", "-v", f"{out}:/w:ro", "-w", "/w",
        "--entrypoint", "python3", runner_image_tag(), *argv,
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return done.returncode, (done.stdout + done.stderr).strip()


def file_prints(path: str, expected: str) -> Check:
    """``path`` came back, and running it prints ``expected``."""

    def check(run: Run) -> str | None:
        if not (run.out / path).is_file():
            return f"{path} was not written"
        code, printed = sandboxed_python(run.out, [path])
        if code != 0 or not any(_same_number(n, expected) for n in _numbers(printed)):
            return f"{path} printed {printed[-80:]!r} (exit {code}), not {expected}"
        return None

    return check


def file_is(path: str, content: str) -> Check:
    def check(run: Run) -> str | None:
        target = run.out / path
        if not target.is_file():
            return f"{path} was not written"
        got = target.read_text(errors="replace")
        return None if got.strip() == content.strip() else f"{path} holds {got[:60]!r}"

    return check


def test_passes(module: str, test: str, test_source: str) -> Check:
    """``module`` came back, the test file is unchanged, and the test passes against it."""

    def check(run: Run) -> str | None:
        if not (run.out / module).is_file():
            return f"{module} did not come back"
        returned = run.out / test
        if returned.is_file() and returned.read_text() != test_source:
            return f"{test} was changed"
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / module).write_bytes((run.out / module).read_bytes())
            (Path(tmp) / test).write_text(test_source)
            Path(tmp).chmod(0o755)
            code, printed = sandboxed_python(Path(tmp), [test])
        return None if code == 0 else f"{test} fails: {printed[-100:]!r}"

    return check


# -- the battery ---------------------------------------------------------------------------

NOTES = "\n".join(f"note {i}: remember item {i * 7 % 13}" for i in range(1, 38)) + "\n"
POEM = (
    "The sandbox hums beneath the load,\nits walls are thin but hold the code;\n"
    "no packet leaves without a rule,\nno secret leaks to tempt a fool.\n"
)
PEOPLE = json.dumps(
    [
        {"name": "Ada", "age": 36},
        {"name": "Grace", "age": 85},
        {"name": "Linus", "age": 54},
        {"name": "Margaret", "age": 61},
    ],
    indent=2,
)
SALES = "date,item,amount\n2026-01-03,pens,12.50\n2026-01-04,paper,40.25\n2026-01-09,ink,7.75\n"
SALES += "2026-01-12,desk,199.00\n2026-01-15,lamp,35.50\n"
CALC_SOURCE = 'def add(a, b):\n    """The sum of a and b."""\n    return a - b\n'
TEST_SOURCE = (
    "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nassert add(-1, 1) == 0\nprint('ok')\n"
)

TASKS: tuple[Task, ...] = (
    Task(
        "calculator",
        "What is 1234 * 5678? Use the calculator.",
        used_tool("calculator", answer_has_number("7006652")),
        agent="demo",
    ),
    Task(
        "fib_script",
        "Write a Python script out/fib.py that prints the 20th Fibonacci number (fib(1) = fib(2) = 1), "
        "run it with bash, and tell me what it printed.",
        all_of(file_prints("out/fib.py", "6765"), answer_has_number("6765")),
    ),
    Task(
        "count_lines",
        "How many lines does notes.txt have?",
        answer_has_number("37"),
        inputs={"notes.txt": NOTES},
    ),
    Task(
        "count_words",
        "How many words are in poem.txt? Count them with a command.",
        used_tool("bash", answer_has_number(str(len(POEM.split())))),
        inputs={"poem.txt": POEM},
    ),
    Task(
        "fix_bug",
        "The test test_calc.py fails. Fix the bug in calc.py so that `python3 test_calc.py` passes. "
        "Do not change the test.",
        test_passes("calc.py", "test_calc.py", TEST_SOURCE),
        inputs={"calc.py": CALC_SOURCE, "test_calc.py": TEST_SOURCE},
    ),
    Task(
        "json_question",
        "people.json lists people and their ages. Who is the oldest? Read the file.",
        answer_has("Grace"),
        inputs={"people.json": PEOPLE},
    ),
    Task(
        "create_file",
        "Create the file out/hello.txt containing exactly this line: Hello from the sandbox",
        file_is("out/hello.txt", "Hello from the sandbox"),
    ),
    Task(
        "exit_code",
        "Run the command `ls /no/such/dir` with bash and tell me its exit code.",
        used_tool("bash", answer_has_number("2")),
    ),
    Task(
        "csv_sum",
        "What is the total of the amount column in sales.csv?",
        answer_has_number("295"),
        inputs={"sales.csv": SALES},
    ),
    Task(
        "find_file",
        "Which file in the project directory contains the text 'rotate keys'? Answer with its path.",
        used_tool("bash", answer_has("settings.py")),
        inputs={
            "project/app.py": "print('hello')\n",
            "project/settings.py": "# TODO: rotate keys every 90 days\nKEYS = []\n",
            "project/README.md": "A small project.\n",
            "project/util/strings.py": "def shout(s):\n    return s.upper()\n",
        },
    ),
)


# -- running -------------------------------------------------------------------------------


def _texts(value: Any) -> list[str]:
    """Every text in a layer0 content value (JSON: a string, or blocks with ``text``)."""
    if isinstance(value, dict):
        own = [value["text"]] if isinstance(value.get("text"), str) else []
        return own + [t for k, v in value.items() if k != "text" for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return [value] if isinstance(value, str) else []


def _write_inputs(task: Task, directory: Path) -> list[str]:
    """The task's files below ``directory``; the top-level names to pass with ``--in``."""
    for rel, text in task.inputs.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sorted({rel.split("/", 1)[0] for rel in task.inputs})


def run_task(task: Task, workdir: Path) -> Run:
    """``airlock run --json`` of ``task`` (inputs and outputs below ``workdir``).

    Raises:
        RuntimeError: ``airlock run`` printed no result (it could not run the job).
    """
    inputs, out = workdir / "in", workdir / "out"
    inputs.mkdir(parents=True)
    tops = _write_inputs(task, inputs)
    argv = [
        sys.executable, "-m", "airlock", "run", "--config", str(CONFIG), task.agent, task.message,
        "--json", "--out", str(out), *[a for top in tops for a in ("--in", top)],
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=inputs, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    seconds = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"airlock run exited {done.returncode} without a result: {done.stderr[-500:]}")
    body = json.loads(lines[-1])
    if "output" not in body:
        raise RuntimeError(f"airlock run failed: {json.dumps(body)[:500]}")
    answer = "\n".join(_texts(body["output"].get("message")))
    return Run(answer, body["summary"], out, seconds, done.returncode)


@dataclass
class TaskRow:
    """One task's runs."""

    task: str
    passed: int = 0
    runs: int = 0
    turns: list[int] = field(default_factory=list)
    calls_ran: int = 0
    calls_refused: int = 0
    echoes: int = 0
    seconds: list[float] = field(default_factory=list)
    failure: str = ""
    errors: int = 0

    def add(self, run: Run, why: str | None) -> None:
        self.runs += 1
        self.passed += why is None
        if why is not None:
            self.failure = why
        s = run.summary
        refused = int(s.get("tool_calls_refused", 0))
        self.calls_refused += refused
        self.calls_ran += sum(s.get("tools_called", {}).values()) - refused
        self.echoes += int(s.get("schema_echoes", 0))
        self.turns.append(int(s.get("turns", 0)))
        self.seconds.append(run.seconds)

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "passed": self.passed,
            "runs": self.runs,
            "turns_median": statistics.median(self.turns) if self.turns else None,
            "calls_ran": self.calls_ran,
            "calls_refused": self.calls_refused,
            "schema_echoes": self.echoes,
            "seconds_median": round(statistics.median(self.seconds), 1) if self.seconds else None,
            "failure": self.failure,
            "errors": self.errors,
        }


def run_battery(tasks: Sequence[Task], runs: int, log: Callable[[str], None]) -> list[TaskRow]:
    """Each task ``runs`` times, interleaved (one of each per round) so drift hits all alike."""
    rows = {t.name: TaskRow(t.name) for t in tasks}
    with tempfile.TemporaryDirectory(prefix="airlock-tasks-") as tmp:
        for r in range(runs):
            for task in tasks:
                row = rows[task.name]
                workdir = Path(tmp) / f"{task.name}-{r}"
                try:
                    run = run_task(task, workdir)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    row.errors += 1
                    row.runs += 1
                    row.failure = f"error: {e}"[:200]
                    log(f"  {task.name} run {r + 1}: ERROR {row.failure}")
                    continue
                why = task.check(run)
                row.add(run, why)
                verdict = "pass" if why is None else f"fail ({why}; answer {run.answer[:160]!r})"
                turns = run.summary.get("turns")
                log(f"  {task.name} run {r + 1}: {verdict} in {run.seconds:.1f}s, {turns} turns")
    return list(rows.values())


def passing_threshold(runs: int) -> int:
    """Runs a task must pass to count as passing: 2 of 3 (two thirds, rounded up)."""
    return -(-2 * runs // 3)


def table(rows: Sequence[TaskRow], *, markdown: bool) -> str:
    """The battery as a table, with the totals line."""
    head = ["task", "passed", "turns", "calls ran / refused (echo)", "s (median)", "last failure"]
    body = []
    for row in rows:
        d = row.as_dict()
        body.append(
            [
                d["task"],
                f"{d['passed']}/{d['runs']}",
                f"{d['turns_median']:g}" if d["turns_median"] is not None else "-",
                f"{d['calls_ran']} / {d['calls_refused']} ({d['schema_echoes']})",
                f"{d['seconds_median']:.1f}" if d["seconds_median"] is not None else "-",
                d["failure"][:70] or "",
            ]
        )
    runs = max((r.runs for r in rows), default=0)
    need = passing_threshold(runs)
    passing = sum(r.passed >= need for r in rows)
    medians = [statistics.median(r.seconds) for r in rows if r.seconds]
    refused = sum(r.calls_refused for r in rows)
    total = (
        f"{passing} of {len(rows)} tasks passed in at least {need} of {runs} runs; "
        f"median seconds per task {statistics.median(medians):.1f}; "
        f"{refused} refused tool calls"
        if medians
        else "no run completed"
    )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in body]
        return "\n".join(lines) + f"\n\n{total}"
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*cells) for cells in body]
    return "\n".join(lines) + f"\n{total}"


# -- the model server ----------------------------------------------------------------------


async def _start_server(grammar: bool, trim: bool) -> Any:
    """A local model server where ``airlock run`` looks for one (the Docker backend's host
    address, the default port), with the battery's switches."""
    from airlock.localmodel import DEFAULT_PORT, LocalModelServer
    from airlock.sandbox import backend

    host = await backend("docker").create().host_address()
    server = LocalModelServer(host=host, tool_grammar=grammar, trim_schemas=trim)
    running = await server.running()
    if running is not None:
        raise SystemExit(
            f"a local model server is already running at {running.base_url} (pid {running.pid}); "
            "the battery starts its own with its switches: stop that one first"
        )
    await server.ensure_ready()
    await server.start(port=DEFAULT_PORT)
    return server


def _server_health(server: Any) -> dict[str, Any]:
    import httpx

    info = server.info
    return dict(httpx.get(f"http://{info.host}:{info.port}/health", trust_env=False, timeout=10).json())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each task (default 3)")
    parser.add_argument("--task", action="append", choices=[t.name for t in TASKS], help="only these")
    parser.add_argument("--grammar", choices=["on", "off"], default="on")
    parser.add_argument("--trim", choices=["on", "off"], default="on")
    parser.add_argument("--json", type=Path, help="also write the rows and the server's statistics here")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    tasks = [t for t in TASKS if not args.task or t.name in args.task]

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    async def battery() -> tuple[list[TaskRow], dict[str, Any]]:
        server = await _start_server(args.grammar == "on", args.trim == "on")
        try:
            log(f"model server at {server.base_url} (grammar {args.grammar}, trim {args.trim})")
            rows = await asyncio.to_thread(run_battery, tasks, args.runs, log)
            return rows, (await asyncio.to_thread(_server_health, server)).get("stats", {})
        finally:
            await server.stop()

    rows, stats = asyncio.run(battery())
    print(f"local model battery: grammar {args.grammar}, schema trimming {args.trim}, {args.runs} runs")
    print(table(rows, markdown=args.markdown))
    print(
        f"model server: {stats.get('completions')} completions ({stats.get('constrained')} constrained), "
        f"{stats.get('completion_tokens')} tokens generated at "
        f"{stats.get('generation_ms_per_token')} ms/token; "
        f"prompts {stats.get('prompt_tokens')} tokens, {stats.get('prompt_evaluated')} evaluated "
        f"in {stats.get('prompt_ms')} ms; {stats.get('calls')} tool calls, "
        f"{stats.get('calls_constrained')} generated under the grammar"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "grammar": args.grammar,
                    "trim": args.trim,
                    "runs": args.runs,
                    "rows": [r.as_dict() for r in rows],
                    "server": stats,
                },
                indent=2,
            )
        )
    return 1 if any(r.errors for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
