"""The protos against the committed descriptor baseline (issue 35 item 9): keep ``v1`` and never
reuse a number; a breaking change fails until the baseline is updated on purpose."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("proto_baseline", ROOT / "scripts" / "proto_baseline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["proto_baseline"] = module
    spec.loader.exec_module(module)
    return module


baseline = _load()


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    return baseline.summary(baseline.descriptor_set())  # type: ignore[no-any-return]


def test_the_protos_make_no_breaking_change_against_the_baseline(current: dict[str, Any]) -> None:
    old = json.loads(baseline.BASELINE.read_text(encoding="utf-8"))
    violations, breaking = baseline.compare(old, current)
    assert not violations, f"a number reused or dropped without `reserved` (never allowed): {violations}"
    assert not breaking, f"breaking changes {breaking}: if deliberate, run `{baseline.UPDATE}` and commit"


MSG = ".airlock.runner.v1.ExecuteRequest"
ENUM = ".airlock.runner.v1.StopReason"
SVC = ".airlock.runner.v1.Runner"


def _changed(current: dict[str, Any], edit: Any) -> tuple[list[str], list[str]]:
    new = copy.deepcopy(current)
    edit(new)
    return baseline.compare(current, new)  # type: ignore[no-any-return]


def test_additions_pass(current: dict[str, Any]) -> None:
    def add(new: dict[str, Any]) -> None:
        new["messages"][MSG]["fields"]["999"] = {
            "name": "x",
            "type": "TYPE_INT32",
            "type_name": "",
            "label": "L",
        }
        new["enums"][ENUM]["values"]["99"] = "STOP_REASON_NEW"
        new["services"][SVC]["NewRpc"] = {"input": MSG, "output": MSG}
        new["messages"][".airlock.runner.v1.New"] = {"fields": {}, "reserved": []}

    assert _changed(current, add) == ([], [])


def _first_field(new: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    number = sorted(new["messages"][MSG]["fields"], key=int)[0]
    return number, new["messages"][MSG]["fields"]


def test_a_removed_field_is_breaking_and_without_reserved_a_violation(current: dict[str, Any]) -> None:
    def remove(new: dict[str, Any]) -> None:
        number, fields = _first_field(new)
        del fields[number]

    def remove_reserved(new: dict[str, Any]) -> None:
        number, fields = _first_field(new)
        del fields[number]
        new["messages"][MSG]["reserved"].append([int(number), int(number)])

    violations, _ = _changed(current, remove)
    assert violations and "without `reserved" in violations[0]
    violations, breaking = _changed(current, remove_reserved)
    assert not violations and "removed (reserved)" in breaking[0]


@pytest.mark.parametrize(
    "key, value", [("type", "TYPE_BYTES"), ("label", "LABEL_REPEATED"), ("name", "renamed")]
)
def test_a_field_changed_at_its_number_is_a_violation(current: dict[str, Any], key: str, value: str) -> None:
    def change(new: dict[str, Any]) -> None:
        number, fields = _first_field(new)
        fields[number][key] = value

    violations, _ = _changed(current, change)
    assert violations and "reused" in violations[0]


def test_a_reserved_number_used_again_is_a_violation(current: dict[str, Any]) -> None:
    old = copy.deepcopy(current)
    old["messages"][MSG]["reserved"].append([900, 900])
    new = copy.deepcopy(old)
    new["messages"][MSG]["fields"]["900"] = {
        "name": "again",
        "type": "TYPE_INT32",
        "type_name": "",
        "label": "L",
    }
    violations, _ = baseline.compare(old, new)
    assert violations == [f"message {MSG}: reserved number 900 used again"]


def test_enum_values_and_rpcs(current: dict[str, Any]) -> None:
    def drop_value(new: dict[str, Any]) -> None:
        del new["enums"][ENUM]["values"]["1"]

    def renumber(new: dict[str, Any]) -> None:
        values = new["enums"][ENUM]["values"]
        values["77"] = values.pop("1")

    def rpc(new: dict[str, Any]) -> None:
        del new["services"][SVC]["Cancel"]
        new["services"][SVC]["Execute"]["output"] = MSG

    assert _changed(current, drop_value)[0]
    assert _changed(current, renumber)[0]  # the old number dropped without `reserved`
    _, breaking = _changed(current, rpc)
    assert any("Cancel removed" in b for b in breaking) and any("Execute changed" in b for b in breaking)
    assert _changed(current, lambda new: new["messages"].pop(MSG))[1] == [f"message {MSG} removed"]
