"""load_config: explicit path, $AIRLOCK_CONFIG, ./airlock.yaml, ./airlock.d/, and a directory of files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airlock.config import CONFIG_ENV, find_config, load_config
from airlock.errors import ConfigError

Write = Callable[..., Path]
AGENT = "agents:\n  {name}:\n    provider: {{kind: scripted, script: []}}\n"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


def test_explicit_path_wins(write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = write(AGENT.format(name="explicit"), "other.yaml")
    write(AGENT.format(name="default"))
    monkeypatch.setenv(CONFIG_ENV, str(write(AGENT.format(name="env"), "env.yaml")))
    assert list(load_config(explicit, cwd=tmp_path).agents) == ["explicit"]


def test_env_var_before_cwd(write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(AGENT.format(name="default"))
    monkeypatch.setenv(CONFIG_ENV, str(write(AGENT.format(name="env"), "env.yaml")))
    assert list(load_config(cwd=tmp_path).agents) == ["env"]


def test_env_var_naming_a_missing_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match=r"gone\.yaml \(\$AIRLOCK_CONFIG\) does not exist"):
        load_config(cwd=tmp_path)


def test_airlock_yaml_before_airlock_d(write: Write, tmp_path: Path) -> None:
    write(AGENT.format(name="file"))
    write(AGENT.format(name="dir"), "airlock.d/a.yaml")
    assert find_config(cwd=tmp_path) == tmp_path / "airlock.yaml"
    assert list(load_config(cwd=tmp_path).agents) == ["file"]


def test_airlock_d_directory(write: Write, tmp_path: Path) -> None:
    write(AGENT.format(name="two"), "airlock.d/20-two.yml")
    write(AGENT.format(name="one"), "airlock.d/10-one.yaml")
    write("not: yaml config", "airlock.d/README.md")
    config = load_config(cwd=tmp_path)
    assert list(config.agents) == ["one", "two"]
    assert config.files == (tmp_path / "airlock.d/10-one.yaml", tmp_path / "airlock.d/20-two.yml")
    assert config.agent("two").source == tmp_path / "airlock.d/20-two.yml"


def test_relative_paths_stay_relative_in_messages(write: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(AGENT.format(name="a") + "    bogus: 1\n")
    monkeypatch.chdir(path.parent)
    with pytest.raises(ConfigError) as info:
        load_config(Path("airlock.yaml"))
    assert str(info.value).startswith("airlock.yaml:4:5: agents.a.bogus: unknown key 'bogus'")


def test_nothing_found(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"no airlock configuration found: looked for \$AIRLOCK_CONFIG, .*airlock\.yaml"
    ):
        load_config(cwd=tmp_path)


def test_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "airlock.d").mkdir()
    with pytest.raises(ConfigError, match=r"holds no \*\.yaml or \*\.yml files"):
        load_config(cwd=tmp_path)


def test_directory_shares_secrets_and_defaults_across_files(write: Write, tmp_path: Path) -> None:
    write(
        "secrets:\n  anthropic-api-key: {file: keys/anthropic}\ndefaults:\n  max_turns: 7\n",
        "conf/00-common.yaml",
    )
    write(
        """
        agents:
          a:
            provider: {kind: anthropic}
            network: {allow: [{destination: api.anthropic.com, port: 443}]}
            credentials: [{secret: anthropic-api-key, inject: sidecar}]
            defaults: {max_duration: 90s}
        """,
        "conf/10-a.yaml",
    )
    config = load_config(tmp_path / "conf")
    agent = config.agent("a")
    assert (agent.spec.defaults.max_turns, agent.spec.defaults.max_duration) == (7, 90_000)
    # A file source is anchored to the file that declares it.
    assert agent.secrets["anthropic-api-key"].file == str(tmp_path / "conf/keys/anthropic")


def test_directory_conflicts_name_both_places(write: Write, tmp_path: Path) -> None:
    a = write("secrets:\n  k: {env: A}\ndefaults:\n  max_turns: 3\n" + AGENT.format(name="x"), "d/a.yaml")
    b = write("defaults:\n  max_turns: 4\nsecrets:\n  k: {env: B}\n", "d/b.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "d")
    assert str(info.value).splitlines() == [
        f"{b}:2:3: defaults.max_turns: defaults.max_turns is set twice: {a}:4:3 and {b}:2:3",
        f"{b}:4:3: secrets.k: secret 'k' is declared twice: {a}:2:3 and {b}:4:3",
    ]
