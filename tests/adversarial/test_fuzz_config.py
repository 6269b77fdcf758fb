"""Bad configuration, fuzzed with hypothesis: the ``airlock.yaml`` loader
(:func:`airlock.config.load_config`), layer0's ``EnvironmentSpec`` and airlock's ``AgentSpec``.

Fuzzed: random YAML-looking text; structurally plausible configs whose values have the wrong
type (NaN, infinities, 5000-digit integers, lists where strings go, ...); alias bombs
("billion laughs", aliases nested in aliases) and aliases that refer to themselves; nesting
thousands of levels deep; huge scalars; NUL and other control characters; invalid UTF-8 and
other byte-level damage of a valid file; random dicts for ``EnvironmentSpec.model_validate``
and ``AgentSpec.model_validate``.

Expected: the configuration either loads (and then every agent's spec can be sent to a
runner over the wire) or :class:`airlock.errors.ConfigError` is raised (for file contents, its
subclass ``InvalidConfigError``) naming the file, with the line and column where the loader
knows them; never another exception type, and never a hang: every load finishes within
seconds, however much an alias bomb would expand. The pydantic models raise only
``pydantic.ValidationError``, and whatever validates survives a JSON round trip unchanged.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from airlock import wire
from airlock.config import AirlockConfig, InvalidConfigError, load_config
from airlock.errors import ConfigError, SpecError
from airlock.spec import AgentSpec, ProviderSpec
from layer0 import JSON_MAX_DEPTH, EnvironmentSpec

pytestmark = [
    pytest.mark.attack("fuzz"),
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
FEW = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
VALID = """\
version: 1
agents:
  coder:
    provider: {kind: scripted, script: []}
    backend: process
    system: "You write code."
    tools: [calculator, read_file]
    defaults: {max_turns: 5, max_duration: 60s}
"""


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config") / "airlock.yaml"


def _load(path: Path, content: str | bytes) -> AirlockConfig | ConfigError:
    """Write ``content`` to ``path`` and load it: the config or the ConfigError raised.

    Any other exception propagates and fails the test; a load that hangs (an alias bomb
    expanding without limit would take hours) fails it at the module's timeout.
    """
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    else:
        path.write_bytes(content)
    try:
        result: AirlockConfig | ConfigError = load_config(path)
    except ConfigError as e:
        result = e
    if isinstance(result, ConfigError):
        _assert_located(path, content, result)
    else:
        assert result.agents, "a configuration without agents loaded"
        for agent in result.agents.values():
            wire.spec_to_proto(agent.spec)  # what loads can be sent to a runner
    return result


def _assert_located(path: Path, content: str | bytes, error: ConfigError) -> None:
    """A clear error: a message, and for file contents every issue in this file, at a line
    and column that exist in it (or 0 for the file as a whole)."""
    assert str(error).strip()
    assert isinstance(error, InvalidConfigError), f"{type(error).__name__}: {error}"
    assert error.issues
    lines = (content if isinstance(content, str) else content.decode("utf-8", "replace")).splitlines()
    for issue in error.issues:
        assert issue.file == path
        assert issue.message.strip()
        assert 0 <= issue.line <= len(lines) + 1, (issue, len(lines))
        assert (issue.line == 0) == (issue.column == 0), issue
        assert str(path) in str(issue)


# --- random YAML-looking text --------------------------------------------------------------------

YAML_ALPHABET = st.sampled_from([*list("abcz09 :-[]{},&*!|>'\"#%@?\n\t.~=_"), "agents", "version", "\n  "])


@FUZZ
@given(text=st.lists(YAML_ALPHABET, max_size=120).map("".join) | st.text(max_size=200))
def test_random_text_loads_or_raises_a_config_error(config_file: Path, text: str) -> None:
    _load(config_file, text)


# --- plausible structure, wrong types ------------------------------------------------------------

WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**31, 2**32, 2**63, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(
        ["", "60s", "-5s", "0s", "1h30m", "500m", "2Gi", "bash", "scripted", "docker", "*", "..."]
    ),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
AGENT_KEYS = [
    "provider",
    "system",
    "tools",
    "tool_options",
    "context",
    "defaults",
    "hooks",
    "limits",
    "backend",
    "resources",
    "network",
    "credentials",
    "isolation",
    "effects",
    "name",
    "unknown_key",
]
#: Every provider field but ``kind``.
PROVIDER_KEYS = [k for k in ProviderSpec.model_fields if k != "kind"]
NESTED = {
    "defaults": ["max_turns", "max_cost", "max_duration", "model", "allowed_tools", "system_addendum"],
    "context": ["strategy", "max_tokens", "keep_last"],
    "limits": ["circuit_breaker_threshold", "stuck_threshold"],
    "resources": ["cpu", "memory", "disk", "gpu"],
    "tool_options": ["bash", "read_file", "calculator", "http_request"],
}


@st.composite
def plausible_configs(draw: st.DrawFn) -> dict[str, Any]:
    agent: dict[str, Any] = {"provider": {"kind": "scripted", "script": []}, "backend": "process"}
    for key in draw(st.lists(st.sampled_from(AGENT_KEYS), max_size=4, unique=True)):
        if key in NESTED and draw(st.booleans()):
            inner = draw(st.lists(st.sampled_from(NESTED[key]), min_size=1, max_size=3, unique=True))
            agent[key] = {k: draw(WRONG) for k in inner}
        else:
            agent[key] = draw(WRONG)
    if isinstance(agent["provider"], dict) and draw(st.booleans()):
        for key in draw(
            st.lists(st.sampled_from(["kind", *PROVIDER_KEYS]), min_size=1, max_size=3, unique=True)
        ):
            agent["provider"][key] = draw(WRONG)
    name = draw(st.sampled_from(["coder", "a", "Bad Name", "-x", "x" * 80, "ünï"]))
    config: dict[str, Any] = {"version": draw(st.sampled_from([1, 1, 2, "1", None])), "agents": {name: agent}}
    if draw(st.booleans()):
        config[draw(st.sampled_from(["defaults", "secrets", "backends", "extra"]))] = draw(WRONG)
    return config


def _dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, allow_unicode=True, sort_keys=False)


@FUZZ
@given(config=plausible_configs())
def test_wrong_types_are_config_errors_at_their_line(config_file: Path, config: dict[str, Any]) -> None:
    text = _dump(config)
    result = _load(config_file, text)
    if isinstance(result, ConfigError):
        assert isinstance(result, InvalidConfigError)
        for issue in result.issues:
            if issue.key.startswith("agents.") and issue.key.count(".") >= 2:
                assert issue.line > 1, issue  # an agent's key is on a line of its own, past `agents:`
    else:
        agent = next(iter(config["agents"].values()))
        for value in _leaves(agent):
            assert not (isinstance(value, float) and not math.isfinite(value)), f"{value} loaded"


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


# --- alias bombs, cycles, depth, huge scalars ----------------------------------------------------

PLACES = ["top", "tool_options", "script", "system", "hooks"]


def _with(place: str, value: str, anchors: str = "") -> str:
    """VALID with ``value`` (YAML flow text) at ``place``; ``anchors`` defined first."""
    agent = "  coder:\n    provider: {kind: scripted, script: []}\n    backend: process\n"
    if place == "top":
        return f"{anchors}version: 1\nextra: {value}\nagents:\n{agent}"
    if place == "tool_options":
        agent += f"    tools: [calculator]\n    tool_options: {{calculator: {{x: {value}}}}}\n"
    elif place == "script":
        agent = agent.replace("script: []", f"script: {value}")
    elif place == "system":
        agent += f"    system: {value}\n"
    else:
        agent += f"    hooks: [{{name: logging, options: {{x: {value}}}}}]\n"
    return f"{anchors}version: 1\nagents:\n{agent}"


@st.composite
def alias_bombs(draw: st.DrawFn) -> tuple[str, int]:
    """Anchors each holding ``fan`` aliases of the one before; the text and its expanded size."""
    levels = draw(st.integers(2, 12))
    fan = draw(st.integers(2, 10))
    lines = ["l0: &l0 [" + ",".join(["lol"] * fan) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * fan) + "]")
    anchors = "_anchors:\n" + "".join(f"  {line}\n" for line in lines)
    text = _with(draw(st.sampled_from(PLACES)), f"*l{levels - 1}", anchors)
    return text, sum(fan**k for k in range(1, levels + 1))


@FEW
@given(bomb=alias_bombs())
def test_alias_bombs_are_refused_in_time(config_file: Path, bomb: tuple[str, int]) -> None:
    text, expanded = bomb
    result = _load(config_file, text)
    assert isinstance(result, InvalidConfigError)  # `_anchors` is no config key anyway
    if expanded > 400_000:  # twice the loader's budget: the bomb is what it must name
        assert any("expands to more than" in i.message for i in result.issues), result


CYCLES = st.sampled_from(["&c [*c]", "&c {a: *c}", "&c [1, [2, *c]]", "&c {a: [{b: *c}]}"])


@FEW
@given(cycle=CYCLES, place=st.sampled_from(PLACES))
def test_aliases_referring_to_themselves_are_config_errors(config_file: Path, cycle: str, place: str) -> None:
    result = _load(config_file, _with(place, cycle))
    assert isinstance(result, InvalidConfigError)
    assert any("cycle" in i.message for i in result.issues), result
    assert all(i.line > 0 for i in result.issues if "cycle" in i.message)


@FEW
@given(
    depth=st.integers(1, 3000),
    style=st.sampled_from(["flow-list", "flow-map", "block-list"]),
    place=st.sampled_from(PLACES),
)
def test_deep_nesting_loads_or_is_refused(config_file: Path, depth: int, style: str, place: str) -> None:
    if style == "flow-list":
        value = "[" * depth + "1" + "]" * depth
    elif style == "flow-map":
        value = "{a: " * depth + "1" + "}" * depth
    else:  # a block list nested in a flow position is not YAML: put it in a literal instead
        value = json.dumps(("- " * depth) + "1")
    result = _load(config_file, _with(place, value))
    if depth > 200 and style != "block-list":
        assert isinstance(result, InvalidConfigError)
        assert any("nested" in i.message for i in result.issues), result


@FEW
@given(
    kind=st.sampled_from(["string", "int", "float", "key", "duration"]),
    size=st.integers(4_000, 400_000),
    place=st.sampled_from(PLACES),
)
def test_huge_scalars_load_or_are_refused(config_file: Path, kind: str, size: int, place: str) -> None:
    if kind == "string":
        text = _with(place, json.dumps("é" * size))
    elif kind == "int":
        text = _with(place, "9" * size)
    elif kind == "float":
        text = _with(place, "1" * size + ".5e" + "9" * 6)
    elif kind == "key":
        text = _with(place, "{" + "k" * size + ": 1}")
    else:
        text = VALID.replace("max_duration: 60s", f"max_duration: {'9' * (size // 100)}s")
    result = _load(config_file, text)
    if kind == "int" and place in ("system", "script", "top"):
        assert isinstance(result, InvalidConfigError)
    if kind == "duration":
        assert isinstance(result, InvalidConfigError)
        assert any(i.key.endswith("max_duration") and i.line == 8 for i in result.issues), result


# --- byte-level damage ---------------------------------------------------------------------------


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(VALID.encode())
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["nul", "control", "invalid-utf8", "random", "cut", "bom"]))
        if how == "nul":
            data[at:at] = b"\x00"
        elif how == "control":
            data[at:at] = bytes([draw(st.sampled_from([1, 7, 8, 0x0B, 0x0C, 0x1B, 0x7F]))])
        elif how == "invalid-utf8":
            data[at:at] = draw(
                st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"])
            )
        elif how == "random":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif how == "cut":
            del data[at:]
        else:
            data[0:0] = draw(st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"]))
    return bytes(data)


@FUZZ
@given(content=damaged())
def test_damaged_bytes_load_or_are_config_errors(config_file: Path, content: bytes) -> None:
    result = _load(config_file, content)
    if b"\x00" in content:
        assert isinstance(result, InvalidConfigError)
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        assert isinstance(result, InvalidConfigError)
        assert any("cannot read file" in i.message for i in result.issues), result


# --- layer0 EnvironmentSpec and AgentSpec --------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25,
)


@st.composite
def environment_dicts(draw: st.DrawFn) -> Any:
    isolation_types = [
        "process",
        "container",
        "gvisor",
        "micro_vm",
        "wasm",
        "network_policy",
        "custom",
        "vm",
        "",
    ]
    rule = st.fixed_dictionaries(
        {"destination": JSON, "action": st.sampled_from(["allow", "deny", "ALLOW", "maybe", 1])},
        optional={"port": st.one_of(st.integers(-5, 70_000), st.floats(), st.text(max_size=5))},
    )
    boundary = st.fixed_dictionaries(
        {"type": st.sampled_from(isolation_types)},
        optional={
            "image": JSON,
            "runtime": JSON,
            "rules": st.lists(rule, max_size=2),
            "boundary_type": JSON,
            "config": JSON,
        },
    )
    injection = st.one_of(
        st.sampled_from(["sidecar", "env_var", "file", "nope"]),
        st.fixed_dictionaries({}, optional={"env_var": JSON, "file": JSON, "sidecar": JSON}),
        JSON,
    )
    credential = st.fixed_dictionaries({}, optional={"name": JSON, "injection": injection})
    resources = st.fixed_dictionaries({}, optional={k: JSON for k in ("cpu", "memory", "disk", "gpu")})
    network = st.fixed_dictionaries(
        {}, optional={"default": st.sampled_from(["allow", "deny", 3]), "rules": st.lists(rule, max_size=3)}
    )
    value = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "isolation": st.lists(boundary, max_size=3) | JSON,
                "credentials": st.lists(credential, max_size=3) | JSON,
                "resources": resources | JSON,
                "network": network | JSON,
                "unknown": JSON,
            },
        )
    )
    return value if draw(st.integers(0, 9)) else draw(JSON)


@FUZZ
@given(data=environment_dicts())
def test_environment_spec_validates_or_raises_validation_error(data: Any) -> None:
    try:
        spec = EnvironmentSpec.model_validate(data)
    except ValidationError as e:
        assert e.errors() and str(e).strip()
        return
    dumped = spec.model_dump(mode="json")
    assert EnvironmentSpec.model_validate(dumped) == spec
    assert EnvironmentSpec.model_validate_json(spec.model_dump_json()) == spec


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@FEW
@given(
    depth=st.integers(1, 20_000), where=st.sampled_from(["custom.config", "credential.name", "resources.cpu"])
)
def test_environment_spec_with_deep_json(depth: int, where: str) -> None:
    deep = _deep(depth)
    if where == "custom.config":
        data: Any = {"isolation": [{"type": "custom", "boundary_type": "x", "config": deep}]}
    elif where == "credential.name":
        data = {"credentials": [{"name": deep, "injection": "sidecar"}]}
    else:
        data = {"resources": {"cpu": deep}}
    if where != "custom.config":  # a list is never a name or a quantity
        with pytest.raises(ValidationError):
            EnvironmentSpec.model_validate(data)
        return
    if depth > JSON_MAX_DEPTH:  # deeper than serde_json (128 levels) could carry it: refused
        # by layer0's check, or from about 250 levels by pydantic-core's own recursion guard
        message = f"nested deeper than {JSON_MAX_DEPTH} levels|maximum validation depth exceeded"
        with pytest.raises(ValidationError, match=message):
            EnvironmentSpec.model_validate(data)
        return
    spec = EnvironmentSpec.model_validate(data)
    assert EnvironmentSpec.model_validate_json(spec.model_dump_json()) == spec


@st.composite
def agent_spec_dicts(draw: st.DrawFn) -> Any:
    data: dict[str, Any] = {
        "name": draw(st.text(max_size=10) | JSON),
        "provider": draw(
            st.fixed_dictionaries(
                {
                    "kind": st.sampled_from(["scripted", "anthropic", "openai_compat", "command", "nope", ""])
                    | JSON
                },
                optional={k: JSON for k in PROVIDER_KEYS},
            )
            | JSON
        ),
    }
    for key in draw(st.lists(st.sampled_from(AGENT_KEYS[:9]), max_size=4, unique=True)):
        data[key] = draw(JSON | WRONG)
    return data


@FUZZ
@given(data=agent_spec_dicts())
def test_agent_spec_validates_or_raises_validation_error(data: Any) -> None:
    try:
        spec = AgentSpec.model_validate(data)
    except ValidationError as e:
        assert e.errors() and str(e).strip()
        return
    assert AgentSpec.model_validate_json(spec.model_dump_json()) == spec


@FEW
@given(config=plausible_configs())
def test_agent_spec_from_yaml_raises_only_spec_error(config: dict[str, Any]) -> None:
    agent = dict(next(iter(config["agents"].values())))
    agent["name"] = "a"
    for key in ("backend", "resources", "network", "credentials", "isolation", "effects"):
        agent.pop(key, None)
    try:
        spec = AgentSpec.from_yaml(_dump(agent))
    except SpecError as e:
        assert str(e).startswith(("invalid agent spec", "agent spec")), e
        return
    assert spec.name == "a"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("x" * 5000, "must be a mapping", id="a-name-too-long-for-a-file"),
        pytest.param("x\0y", "not valid YAML", id="a-NUL-byte"),
        pytest.param("name: a\nsystem: " + "[" * 3000 + "]" * 3000, "nested too deeply", id="deep"),
        pytest.param(
            "name: a\nlimits: {stuck_threshold: " + "9" * 5000 + "}", "unreadable value", id="5000-digits"
        ),
        pytest.param("name: 2001-13-45\nprovider: {kind: scripted}", "unreadable value", id="bad-date"),
        pytest.param(
            "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
            + "".join(
                f"{c}: &{c} [{','.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True)
            )
            + "name: *h\n",
            "expands to more than",
            id="alias-bomb",
        ),
        pytest.param("name: a\nsystem: &c [*c]\n", "expands to more than", id="alias-cycle"),
    ],
)
def test_agent_spec_from_yaml_refuses_hostile_text_with_a_spec_error(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        AgentSpec.from_yaml(text)
