"""The arguments of every sandbox tool (``bash``, ``read_file``, ``write_file``, ``list_files``,
``edit_file``, ``http_request``, ``calculator``), fuzzed with hypothesis, each tool called the
way a turn calls it (``await tool.call(input, ctx)``) on a real workspace directory.

Fuzzed: paths that try to leave the workspace (``..`` chains, absolute paths such as
``/etc/passwd`` and ``/proc/self/environ``, symlinks to a sibling directory holding a canary
with a random secret, to the canary itself, symlink loops, dangling symlinks, a FIFO), with
``//``, ``.``, trailing slashes, Unicode look-alikes of ``.`` and ``/``, components and paths
beyond NAME_MAX and PATH_MAX, newlines; NUL bytes and lone surrogates in every string
argument; strings of megabytes; 5000-digit integers, NaN and infinities, lists, dicts, null
and booleans for every field; missing and unknown fields; inputs that are not objects or are
nested thousands of levels deep; ``edit_file`` replacements that would grow a file without
bound; hostile ``calculator`` expressions (``9**9**9**9``, ``round(5, -10**9)``, deep nesting,
attribute access, names, lambdas); ``http_request`` URLs with other schemes, bad ports and
malformed syntax, and hostile headers and bodies sent to a server on 127.0.0.1 that this
module starts (a socket guard refuses, and records, any other destination); ``bash`` commands
with NUL, of megabytes, and hostile timeouts; invalid tool options.

Expected: every call returns a JSON value that encodes as UTF-8, or raises
:class:`airlock.errors.ToolError` with a valid kind and a non-empty message under 64 KiB
(an echoed 5 MB argument never comes back whole); never another exception type, and never a
hang. A path that resolves outside the workspace is refused (``permission_denied``): the
canary's secret appears in no result and no message, and the outside directory is
byte-identical after every call. Results stay within the tool's documented caps (bytes read,
entries listed, output and response bytes kept).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shlex
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from airlock.errors import SpecError, ToolError, ToolErrorKind
from airlock.spec import SANDBOX_TOOLS
from airlock.tools import build_tools
from airlock.tools._workspace import PATH_MAX
from airlock.turn import ToolContext, ToolDyn

pytestmark = [
    pytest.mark.attack("fuzz"),
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
SOME = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
#: For bash (a process per call) and megabyte-sized inputs.
FEW = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
CTX = ToolContext(tool_use_id="t1")
KINDS = set(get_args(ToolErrorKind))
MAX_MESSAGE = 64 * 1024
#: Caps configured for the tools under test (small, so that they are easy to reach).
READ_CAP = 4096
WRITE_CAP = 64 * 1024
LIST_CAP = 50
BASH_CAP = 4096
HTTP_CAP = 4096
#: Room for a cap's ``[truncated N bytes]`` markers.
MARKER = 128
OPTIONS: dict[str, dict[str, Any]] = {
    "bash": {"timeout_s": 2, "max_output_bytes": BASH_CAP},
    "read_file": {"max_bytes": READ_CAP},
    "write_file": {"max_bytes": WRITE_CAP},
    "list_files": {"max_entries": LIST_CAP},
    "edit_file": {"max_bytes": WRITE_CAP},
    "http_request": {"timeout_s": 2, "max_response_bytes": HTTP_CAP},
}
PATH_TOOLS = ["read_file", "write_file", "list_files", "edit_file"]
#: The file name in the workspace that is not UTF-8 (as bytes a command could write).
BAD_NAME = os.fsdecode(b"bad-\xff\xfe.txt")


# --- the box: a workspace, a sibling outside it, and a guard on the network ------------------


@dataclass
class Box:
    ws: Path
    outside: Path
    secret: str
    tools: dict[str, ToolDyn]
    origin: str  # http://127.0.0.1:PORT of this module's server
    closed_port: int  # a port on 127.0.0.1 nothing listens on
    stray: list[object]  # destinations other than 127.0.0.1 something tried to reach


def _snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``root`` (symlinks not followed): its kind and content or target."""
    snap: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                snap[rel] = ("link", os.fsencode(os.readlink(full)))
            elif os.path.isdir(full):
                snap[rel] = ("dir", b"")
            else:
                snap[rel] = ("file", Path(full).read_bytes())
    return snap


class _Handler(BaseHTTPRequestHandler):
    """Answers every method: ``/big`` with 100 kB, anything else with the request echoed."""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        data = b"z" * 100_000 if self.path.startswith("/big") else self.requestline.encode() + b"\n" + body
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    base = tmp_path_factory.mktemp("fuzz-tools")
    ws, outside = base / "ws", base / "outside"
    ws.mkdir()
    outside.mkdir()
    secret = secrets.token_hex(16)
    (outside / "secret.txt").write_text(secret)
    (outside / "sub").mkdir()
    (outside / "sub" / "other.txt").write_text(f"also {secret}")
    (ws / "hello.txt").write_text("hello world\n")
    (ws / "inner").mkdir()
    (ws / "inner" / "deep.txt").write_text("deep\n")
    (ws / "esc_dir").symlink_to(outside)
    (ws / "esc_file").symlink_to(outside / "secret.txt")
    (ws / "inner" / "up").symlink_to("../../outside")
    (ws / "loop_a").symlink_to("loop_b")
    (ws / "loop_b").symlink_to("loop_a")
    (ws / "self_loop").symlink_to("self_loop")
    (ws / "dangling").symlink_to("nowhere")
    (ws / "dangling_out").symlink_to(outside / "new.txt")
    (ws / "root").symlink_to("/")
    os.mkfifo(ws / "fifo")
    (ws / BAD_NAME).write_text("not a UTF-8 name\n")
    (ws / "bad_link").symlink_to(BAD_NAME)

    with pytest.MonkeyPatch.context() as mp:
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            mp.delenv(var, raising=False)
        stray: list[object] = []
        real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

        def connect(self: socket.socket, address: Any) -> None:
            if not (isinstance(address, tuple) and address[0] == "127.0.0.1"):
                stray.append(address)
                raise ConnectionRefusedError(f"fuzz guard: {address!r} is not 127.0.0.1")
            real_connect(self, address)

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host not in ("127.0.0.1", b"127.0.0.1"):
                stray.append(host)
                raise socket.gaierror(socket.EAI_NONAME, f"fuzz guard: {host!r} is not 127.0.0.1")
            return real_getaddrinfo(host, *args, **kwargs)

        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket, "getaddrinfo", getaddrinfo)

        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
        probe.close()
        tools = {tool.name: tool for tool in build_tools(list(SANDBOX_TOOLS), OPTIONS, ws)}
        try:
            yield Box(
                ws=ws.resolve(),
                outside=outside,
                secret=secret,
                tools=tools,
                origin=f"http://127.0.0.1:{server.server_address[1]}",
                closed_port=closed_port,
                stray=stray,
            )
        finally:
            server.shutdown()
            server.server_close()


@pytest.fixture(scope="module")
def outside_before(box: Box) -> dict[str, tuple[str, bytes]]:
    return _snapshot(box.outside)


# --- calling a tool and the properties every call must have ----------------------------------


def _call(
    box: Box, before: dict[str, tuple[str, bytes]], name: str, value: Any
) -> tuple[JsonValue | None, ToolError | None]:
    """Call tool ``name`` with ``value``: its result or the ToolError it raised, both checked.

    Any other exception propagates and fails the test; a hang fails it at the timeout.
    """
    result: JsonValue | None = None
    error: ToolError | None = None
    try:
        result = asyncio.run(box.tools[name].call(value, CTX))
    except ToolError as e:
        error = e
    if error is not None:
        assert error.kind in KINDS, error.kind
        assert isinstance(error.message, str) and error.message.strip(), "an empty error message"
        size = len(error.message.encode("utf-8"))  # also: the message can travel as UTF-8
        assert size < MAX_MESSAGE, f"{name}: a {size}-byte error message: {error.message[:300]!r}"
        assert box.secret not in error.message, f"{name} leaked the canary: {error.message[:300]!r}"
    else:
        text = json.dumps(result, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # the result can travel as UTF-8 (no lone surrogates)
        assert box.secret not in text, f"{name} leaked the canary: {text[:300]!r}"
    assert _snapshot(box.outside) == before, f"{name} changed the directory outside the workspace"
    assert not box.stray, f"{name} tried to reach {box.stray}"
    return result, error


# --- strategies ------------------------------------------------------------------------------

#: Text of every kind hypothesis draws, plus NUL, lone surrogates and other troublemakers.
ODD = st.sampled_from(
    ["\x00", "a\x00b", "\ud800", "\udcff", "\n", "\r\n", "\t", " ", "\u202e", "\ufeff", "\uffff", "💥"]
)
TEXT = st.one_of(
    st.text(max_size=40),
    st.lists(st.one_of(st.text(max_size=8), ODD), max_size=6).map("".join),
)
HUGE_TEXT = st.builds(
    lambda unit, count: unit * count,
    st.sampled_from(["a", "é", "\x00", "../", "💥", "ab\n"]),
    st.sampled_from([70_000, 300_000, 1_000_000, 2_500_000]),
)
SEGMENTS = st.one_of(
    st.sampled_from(
        [
            "hello.txt",
            "inner",
            "deep.txt",
            "esc_dir",
            "esc_file",
            "up",
            "loop_a",
            "self_loop",
            "dangling",
            "dangling_out",
            "root",
            "fifo",
            "bad_link",
            "secret.txt",
            "outside",
            "sub",
            "etc",
            "passwd",
            "proc",
            "self",
            "environ",
            "nope",
            ".",
            "..",
            "...",
            "",
            # look-alikes of "." and "/": ordinary names, never a way up
            "\u2024\u2024",
            "\uff0e\uff0e",
            "\u2215",
            "..\u2215..",
            "%2e%2e",
            "..\\..",
            "\u00a0..",
            "..\n",
            "new\nline",
        ]
    ),
    st.text(max_size=10),
    ODD,
    st.sampled_from([255, 256, 300]).map(lambda n: "n" * n),  # around NAME_MAX
)
PREFIXES = st.sampled_from(
    [
        "",
        "",
        "./",
        "/",
        "//",
        "@ws/",
        "@ws//",
        "@out/",
        "../",
        "../../",
        "inner/../../",
        "../" * 40,
        "/proc/self/root@ws/",
        "/etc/",
        "/proc/self/",
    ]
)
#: Paths that each try a known way out (or in) as a whole.
FIXED_PATHS = st.sampled_from(
    [
        "/etc/passwd",
        "/proc/self/environ",
        "/proc/self/cwd/README.md",
        "@out/secret.txt",
        "@out/sub/other.txt",
        "@out/new.txt",
        "../outside/secret.txt",
        "../outside/new.txt",
        "inner/../../outside/secret.txt",
        "inner/up/secret.txt",
        "inner/up/new.txt",
        "esc_dir/secret.txt",
        "esc_dir/sub/other.txt",
        "esc_dir/new.txt",
        "esc_file",
        "dangling_out",
        "root/etc/passwd",
        "root@out/secret.txt",
        "loop_a/x",
        "self_loop",
        "fifo",
        "bad_link",
        "hello.txt/",
        "hello.txt/.",
        "hello.txt/x",
        "inner//deep.txt",
        "./inner/./deep.txt",
        "@ws/../outside/secret.txt",
        "@ws",
        ".",
        "",
        "a/" * 3000 + "x",  # beyond PATH_MAX
        "../" * 2000 + "etc/passwd",
        "x" * 5000,
        "esc_dir/" + "x" * 5000,
    ]
)


@st.composite
def paths(draw: st.DrawFn) -> str:
    """A path, with ``@ws``/``@out`` standing for the workspace and the outside directory."""
    if draw(st.integers(0, 3)) == 0:
        return draw(FIXED_PATHS)
    parts = draw(st.lists(SEGMENTS, min_size=1, max_size=5))
    seps = draw(st.lists(st.sampled_from(["/", "/", "//", "/./", "/../"]), min_size=len(parts)))
    path = draw(PREFIXES) + "".join(p + s for p, s in zip(parts, seps, strict=False))
    return path if draw(st.booleans()) else path.rstrip("/")


def _place(box: Box, path: str) -> str:
    return path.replace("@ws", str(box.ws)).replace("@out", str(box.outside))


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _real(box: Box, path: str) -> str | None:
    """Where ``path`` resolves (as the kernel follows it); None for NUL or lone surrogates
    (refused as invalid input before any lookup)."""
    try:
        os.fsencode(path)
        return os.path.realpath(os.path.join(box.ws, path))
    except (ValueError, OSError):
        return None


def _inside(real: str, root: Path) -> bool:
    return real == str(root) or real.startswith(f"{root}/")


def _escapes(box: Box, path: str) -> bool:
    """Whether ``path`` resolves to somewhere outside the workspace."""
    real = _real(box, path)
    return real is not None and not _inside(real, box.ws)


def _assume_harmless_write(box: Box, path: str) -> None:
    """Writes are tried only where a confinement bug would hit this module's own directory,
    never the host's files (``/etc/passwd`` is tried by the read-only tools)."""
    real = _real(box, path)
    assume(real is None or _inside(real, box.outside.parent))


# --- paths -----------------------------------------------------------------------------------


@FUZZ
@given(
    tool=st.sampled_from(PATH_TOOLS),
    path=paths(),
    content=TEXT,
    old=TEXT,
    new=TEXT,
    flag=st.booleans(),
)
def test_file_tools_stay_in_the_workspace(
    box: Box,
    outside_before: dict[str, tuple[str, bytes]],
    tool: str,
    path: str,
    content: str,
    old: str,
    new: str,
    flag: bool,
) -> None:
    path = _place(box, path)
    if tool in ("write_file", "edit_file"):
        _assume_harmless_write(box, path)
    args: dict[str, Any] = {"path": path}
    if tool == "write_file":
        args["content"] = content
    elif tool == "edit_file":
        args |= {"old_string": old, "new_string": new, "replace_all": flag}
    elif tool == "list_files":
        args["recursive"] = flag
    result, error = _call(box, outside_before, tool, args)
    if len(path) > PATH_MAX:  # refused before resolving: that takes time quadratic in the length
        assert error is not None and error.kind == "invalid_input", (path[:100], result)
    elif _escapes(box, path):
        # Other arguments invalid (an empty old_string, a lone surrogate) are refused first.
        others_valid = all(_utf8(v) for v in args.values() if isinstance(v, str)) and (
            tool != "edit_file" or old
        )
        expected = {"permission_denied"} if others_valid else {"permission_denied", "invalid_input"}
        assert error is not None and error.kind in expected, (path, result, error)
    if error is not None:
        return
    if tool == "read_file":
        assert isinstance(result, str) and len(result) <= READ_CAP + MARKER
    elif tool == "list_files":
        assert isinstance(result, dict)
        entries = result["entries"]
        assert isinstance(entries, list) and len(entries) <= LIST_CAP
        if len(entries) < LIST_CAP:
            assert result["truncated"] is False
    elif tool == "write_file":
        written = Path(os.path.realpath(os.path.join(box.ws, path)))
        assert written.read_bytes() == content.encode("utf-8")


@SOME
@given(path=paths())
def test_a_file_written_anywhere_reads_back_or_is_refused_alike(
    box: Box, outside_before: dict[str, tuple[str, bytes]], path: str
) -> None:
    """read_file sees what write_file wrote, at the same path; both refuse the same ways out."""
    path = _place(box, path)
    _assume_harmless_write(box, path)
    content = secrets.token_hex(8)
    _, write_error = _call(box, outside_before, "write_file", {"path": path, "content": content})
    result, read_error = _call(box, outside_before, "read_file", {"path": path})
    if write_error is None:
        assert read_error is None and result == content, (path, read_error)
    elif write_error.kind == "permission_denied":
        assert read_error is not None and read_error.kind == "permission_denied", (path, result)


# --- hostile values for every field ----------------------------------------------------------


def _nest(depth: int, as_dict: bool) -> JsonValue:
    value: JsonValue = "x"
    for _ in range(depth):
        value = {"path": value} if as_dict else [value]
    return value


HOSTILE: st.SearchStrategy[Any] = st.deferred(
    lambda: st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from([10**5000, -(10**5000), 2**63, -(2**63) - 1, 0, -1]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e-320, 1e308]),
        TEXT,
        st.lists(HOSTILE, max_size=3),
        st.dictionaries(TEXT, HOSTILE, max_size=3),
        st.builds(_nest, st.sampled_from([100, 1000, 5000]), st.booleans()),
    )
)
FIELDS: dict[str, list[str]] = {
    "bash": ["command", "timeout_s"],
    "read_file": ["path"],
    "write_file": ["path", "content"],
    "list_files": ["path", "recursive"],
    "edit_file": ["path", "old_string", "new_string", "replace_all"],
    "http_request": ["method", "url", "headers", "body"],
    "calculator": ["expression"],
}


@st.composite
def hostile_inputs(draw: st.DrawFn, tool: str) -> Any:
    """An input for ``tool``: not an object, or an object whose fields hold hostile values."""
    if draw(st.integers(0, 4)) == 0:
        return draw(HOSTILE)
    fields = draw(st.lists(st.sampled_from([*FIELDS[tool], "unknown", "x" * 100_000]), unique=True))
    return {field: draw(HOSTILE) for field in fields}


def _defuse(tool: str, value: Any) -> Any:
    """Keep a fuzzed input harmless where it would pass validation: a ``bash`` command runs
    only as an argument of ``true``. (A fuzzed URL is random text, refused for its scheme;
    the socket guard would stop anything else.)"""
    if not isinstance(value, dict):
        return value
    if tool == "bash" and isinstance(value.get("command"), str):
        value["command"] = "true " + shlex.quote(value["command"])
    return value


@FUZZ
@given(data=st.data(), tool=st.sampled_from(list(SANDBOX_TOOLS)))
def test_hostile_values_in_every_field_are_refused_cleanly(
    box: Box, outside_before: dict[str, tuple[str, bytes]], data: st.DataObject, tool: str
) -> None:
    value = _defuse(tool, data.draw(hostile_inputs(tool)))
    _call(box, outside_before, tool, value)


@st.composite
def huge_inputs(draw: st.DrawFn, box: Box) -> tuple[str, dict[str, Any]]:
    """A valid input for some tool with one string field of megabytes."""
    huge = draw(HUGE_TEXT)
    choices: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": huge}),
        ("list_files", {"path": huge}),
        ("write_file", {"path": huge, "content": "x"}),
        ("write_file", {"path": "huge.txt", "content": huge}),
        ("edit_file", {"path": huge, "old_string": "a", "new_string": "b"}),
        ("edit_file", {"path": "hello.txt", "old_string": huge, "new_string": "b"}),
        ("edit_file", {"path": "hello.txt", "old_string": "world", "new_string": huge}),
        ("calculator", {"expression": huge}),
        ("bash", {"command": huge}),
        ("bash", {"command": "true " + shlex.quote(huge)}),
        ("http_request", {"url": huge}),
        ("http_request", {"url": f"{box.origin}/{huge}"}),
        ("http_request", {"url": f"{box.origin}/echo", "method": "POST", "body": huge}),
        ("http_request", {"url": f"{box.origin}/echo", "headers": {"x-big": huge}}),
        ("http_request", {"url": f"{box.origin}/echo", "headers": {huge: "1"}}),
        ("read_file", {"path": "hello.txt", huge: 1}),
    ]
    return draw(st.sampled_from(choices))


@FEW
@given(data=st.data())
def test_enormous_strings_are_refused_or_capped(
    box: Box, outside_before: dict[str, tuple[str, bytes]], data: st.DataObject
) -> None:
    tool, args = data.draw(huge_inputs(box))
    result, _ = _call(box, outside_before, tool, args)
    if tool == "http_request" and isinstance(result, dict):
        assert len(str(result["body"])) <= HTTP_CAP + MARKER


# --- edit_file -------------------------------------------------------------------------------


@SOME
@given(
    unit=st.sampled_from(["a", "ab", "é", "\n"]),
    copies=st.integers(1, 20_000),
    new=st.builds(lambda s, n: s * n, st.sampled_from(["b", "ü", "xyz"]), st.integers(0, 5_000_000)),
    replace_all=st.booleans(),
)
def test_edit_file_never_grows_a_file_past_its_cap(
    box: Box,
    outside_before: dict[str, tuple[str, bytes]],
    unit: str,
    copies: int,
    new: str,
    replace_all: bool,
) -> None:
    """replace_all of a string occurring thousands of times by megabytes is refused from the
    count, before the replacement is built (it would need gigabytes)."""
    target = box.ws / "repeat.txt"
    original = (unit * copies).encode("utf-8")
    target.write_bytes(original)
    args = {"path": "repeat.txt", "old_string": unit, "new_string": new, "replace_all": replace_all}
    _, error = _call(box, outside_before, "edit_file", args)
    after = target.read_bytes()
    assert len(after) <= WRITE_CAP or after == original
    if error is not None:
        assert after == original  # a failed edit changes nothing
    else:
        assert after == (unit * copies).replace(unit, new).encode("utf-8")


# --- calculator ------------------------------------------------------------------------------

ATOMS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(
        ["9", "99", "2", "0", "1e308", "1e-320", "0.5", "pi", "e", "tau", "10**9", "-10**9", "4096", "1000"]
    ),
    st.sampled_from(
        [
            "().__class__",
            "(1).__class__.__bases__",
            "x",
            "__import__('os')",
            "lambda: 1",
            "[1]*9",
            "'a'*9",
            "{1: 2}",
            "not 1",
            "1 if 1 else 2",
            "f'{1}'",
            "[x for x in (1,)]",
            "(yield)",
            "...",
            "1j",
            "True",
            "None",
            "b'x'",
        ]
    ),
)
FUNCS = st.sampled_from(
    ["abs", "round", "min", "max", "sqrt", "exp", "log", "log10", "factorial", "floor", "ceil", "sin", "pow"]
)


def _expressions() -> st.SearchStrategy[str]:
    binop = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<<", "&", "@", "and"])

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, binop, inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
            st.tuples(FUNCS, st.lists(inner, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
            inner.map(lambda s: f"-{s}"),
        )

    return st.recursive(ATOMS, extend, max_leaves=12)


HOSTILE_EXPRESSIONS = st.one_of(
    _expressions(),
    st.sampled_from(
        [
            "9**9**9**9",
            "9**9**9",
            "(9**9)**(9**9)",
            "2**4096*2**4096",
            "factorial(1000)",
            "factorial(factorial(10))",
            "factorial(10**100)",
            "round(5, -10**9)",
            "round(2**4000, -(10**100))",
            "round(1.5, 10**9)",
            "exp(2**4000)",
            "sqrt(2**4095)",
            "10.0**400",
            "(-8)**(1/3)",
            "2**-(2**4000)",
            "min()",
            "max(1)",
            "log(0)",
        ]
    ),
    st.integers(1, 499).map(lambda n: "(" * n + "1" + ")" * n),
    st.integers(1, 999).map(lambda n: "-" * n + "1"),
    st.integers(1, 249).map(lambda n: "not " * n + "1"),
    st.integers(1, 499).map(lambda n: "1" + "+1" * n),
    st.integers(1, 330).map(lambda n: "9" + "**9" * n),
    st.integers(1, 140).map(lambda n: "abs(" * n + "1" + ")" * n),
    st.integers(1, 900).map(lambda n: "9" * n),
    st.integers(1_001, 5_000).map(lambda n: "1" * n),  # beyond the documented 1000 characters
    TEXT,
)


@FUZZ
@given(expression=HOSTILE_EXPRESSIONS)
def test_calculator_refuses_or_answers_small(
    box: Box, outside_before: dict[str, tuple[str, bytes]], expression: str
) -> None:
    result, _ = _call(box, outside_before, "calculator", {"expression": expression})
    if result is not None:
        # An int within 4096 bits has at most 1234 digits; a float's repr is short.
        assert isinstance(result, str) and len(result) <= 1300, result[:100]


# --- http_request ----------------------------------------------------------------------------

VALID_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
METHODS = st.sampled_from([*VALID_METHODS, *VALID_METHODS, "get", "TRACE", "", "GET\r\n"])
HEADER_TEXT = st.one_of(st.text(max_size=20), ODD, st.sampled_from(["x\r\nInjected: 1", "€", "a b", ":", ""]))
ASCII_TEXT = st.text(st.characters(max_codepoint=127), max_size=20)
HEADERS = st.one_of(
    st.dictionaries(ASCII_TEXT, ASCII_TEXT, max_size=3),  # reach the wire (h11 judges them)
    st.dictionaries(HEADER_TEXT, HEADER_TEXT, max_size=3),
    st.just({}),
)


@st.composite
def urls(draw: st.DrawFn, box: Box) -> str:
    """A URL that reaches nothing, or this module's server on 127.0.0.1, or a closed port there."""
    kind = draw(st.integers(0, 5))
    if kind == 0:  # another scheme, or none: refused before any traffic
        scheme = draw(st.sampled_from(["file", "gopher", "ftp", "ws", "data", "javascript", "dict", ""]))
        return f"{scheme}:{draw(st.sampled_from(['', '/', '//', '///']))}" + draw(
            st.sampled_from(["/etc/passwd", "127.0.0.1/", "text/plain,x", "alert(1)", ""])
        )
    if kind == 1:  # malformed (none names a host to look up: "http://%zz/" would be a DNS query)
        return draw(
            st.sampled_from(
                [
                    "http://",
                    "https://",
                    "http:///",
                    "http://:80/",
                    "http://[::1",
                    "http://127.0.0.1:99999/",
                    "http://127.0.0.1:-1/",
                    "http://127.0.0.1:0/",
                    "http://127.0.0.1:x/",
                    "http://127.0.0.1:" + "9" * 30 + "/",
                    "http://127.0.0.1\x00.example/",
                    "http://127.0.0.1\ud800/",
                    "http://user@:1/",
                    "HTTP://",
                    "http:\\\\127.0.0.1\\",
                    " http://127.0.0.1/",
                ]
            )
        )
    origin = f"http://127.0.0.1:{box.closed_port}" if kind == 2 else box.origin
    tail = draw(
        st.one_of(
            st.text(max_size=30),
            st.text(st.sampled_from("abz09/?=&%#.-_~:@!$'()*+,;[]"), max_size=30),
            ODD,
            st.sampled_from(["big", "big?x=1", "a#b", "%00", "..//..", "@evil.example/"]),
        )
    )
    return f"{origin}/{tail}"


@SOME
@given(data=st.data(), method=METHODS, headers=HEADERS, body=st.none() | st.text(max_size=40) | TEXT)
def test_http_request_urls_headers_and_bodies(
    box: Box,
    outside_before: dict[str, tuple[str, bytes]],
    data: st.DataObject,
    method: str,
    headers: dict[str, str],
    body: str | None,
) -> None:
    url = data.draw(urls(box))
    result, error = _call(
        box, outside_before, "http_request", {"method": method, "url": url, "headers": headers, "body": body}
    )
    if not url.lower().startswith(("http://", "https://")):
        assert error is not None and error.kind == "invalid_input", (url, result)
    if isinstance(result, dict):
        assert url.startswith(box.origin), (url, result)  # nothing else answers
        assert len(str(result["body"])) <= HTTP_CAP + MARKER


# --- bash ------------------------------------------------------------------------------------

COMMANDS = st.one_of(
    st.sampled_from(
        [
            "echo a\x00b",
            "\x00",
            "printf '\\377\\376\\000'",  # invalid UTF-8 and NUL on stdout
            "head -c 100000 /dev/zero",  # beyond the output cap
            "head -c 100000 /dev/zero >&2",
            "sleep 5",  # beyond the configured timeout
            "exit 300",
            "kill -9 $$",
            "kill -STOP $$",
            "ulimit -f 0; echo x > f.out",
            "echo \ud800",
            "--invalid-option",
            "set -o nosuchoption",
        ]
    ),
    TEXT.map(lambda s: "printf %s " + shlex.quote(s)),
    TEXT.map(lambda s: "true " + shlex.quote(s)),
)
TIMEOUTS = st.one_of(
    st.none(),
    st.sampled_from([0.01, 1e-300, 1, 1e308, float("inf"), float("nan"), 0, -1, 10**5000, True, "1", [1]]),
)


@FEW
@given(command=COMMANDS, timeout=TIMEOUTS)
def test_bash_arguments(
    box: Box, outside_before: dict[str, tuple[str, bytes]], command: str, timeout: Any
) -> None:
    # By design bash is not confined by path (the sandbox is its boundary, the workspace only
    # its cwd), so these commands never name the outside directory; _call still checks it.
    args: dict[str, Any] = {"command": command}
    if timeout is not None:
        args["timeout_s"] = timeout
    result, error = _call(box, outside_before, "bash", args)
    if "\x00" in command:
        assert error is not None and error.kind == "invalid_input"
    if isinstance(result, dict):
        assert len(str(result["stdout"])) <= BASH_CAP + MARKER
        assert len(str(result["stderr"])) <= BASH_CAP + MARKER


# --- options ---------------------------------------------------------------------------------


@SOME
@given(
    tool=st.sampled_from(list(SANDBOX_TOOLS)),
    options=st.dictionaries(
        st.sampled_from(["timeout_s", "max_bytes", "max_entries", "max_output_bytes", "max_response_bytes"])
        | st.text(max_size=10),
        HOSTILE,
        max_size=3,
    ),
)
def test_invalid_tool_options_are_spec_errors(box: Box, tool: str, options: dict[str, Any]) -> None:
    try:
        (built,) = build_tools([tool], {tool: options}, box.ws)
    except SpecError as e:
        assert str(e).strip()
        assert len(str(e).encode("utf-8")) < MAX_MESSAGE
    else:
        assert built.name == tool
