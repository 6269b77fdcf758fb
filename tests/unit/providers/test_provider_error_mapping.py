"""Every exception class the anthropic and openai SDKs define maps to a TurnError kind.

Like httpx's ``test_exceptions.py``: a new SDK class without an entry fails here.
"""

from __future__ import annotations

import inspect
from types import ModuleType

import anthropic
import openai
import pytest

from airlock.providers import map_anthropic_error, map_openai_error
from airlock.providers._anthropic import ANTHROPIC_ERROR_KINDS
from airlock.providers._common import kind_for_status
from airlock.providers._openai_compat import OPENAI_ERROR_KINDS


def _public_exceptions(module: ModuleType) -> list[type[BaseException]]:
    # __all__ plus what the package namespace holds (some error classes are not in __all__)
    names = set(module.__all__) | {name for name, _ in list(vars(module).items())}
    exported = [getattr(module, name) for name in sorted(names) if not name.startswith("_")]
    classes = [obj for obj in exported if inspect.isclass(obj) and issubclass(obj, BaseException)]
    return list(dict.fromkeys(classes))


def _instance(cls: type[BaseException], status: int | None) -> BaseException:
    exc = cls.__new__(cls)  # no __init__: the SDK constructors need live HTTP objects
    exc.request_id = None  # type: ignore[attr-defined]  # read by some classes' __str__
    if status is not None:
        exc.status_code = status  # type: ignore[attr-defined]
    return exc


def _status(cls: type[BaseException]) -> int | None:
    value = getattr(cls, "status_code", None)
    return value if isinstance(value, int) else None


@pytest.mark.parametrize(
    ("module", "table"),
    [(anthropic, ANTHROPIC_ERROR_KINDS), (openai, OPENAI_ERROR_KINDS)],
    ids=["anthropic", "openai"],
)
def test_every_exported_exception_has_an_explicit_entry(module: ModuleType, table: dict[str, str]) -> None:
    missing = sorted(c.__name__ for c in _public_exceptions(module) if c.__name__ not in table)
    assert not missing, f"{module.__name__} exceptions without a mapping: {missing}"
    stale = sorted(set(table) - {c.__name__ for c in _public_exceptions(module)})
    assert not stale, f"mapping entries for classes {module.__name__} does not define: {stale}"


@pytest.mark.parametrize(
    ("module", "mapper"),
    [(anthropic, map_anthropic_error), (openai, map_openai_error)],
    ids=["anthropic", "openai"],
)
def test_every_exported_exception_maps_to_a_turn_error(module: ModuleType, mapper: object) -> None:
    for cls in _public_exceptions(module):
        err = mapper(_instance(cls, _status(cls)))  # type: ignore[operator]
        assert err.kind in ("model", "retryable", "non_retryable", "other"), cls
        assert cls.__name__ in str(err)


def test_anthropic_status_classes_follow_the_status_rules() -> None:
    """Every class the SDK builds from a status (including the many error-code subclasses)
    maps by its status, except the documented exceptions."""
    from anthropic._error_classes import ERROR_CLASSES

    permanent_despite_status = {
        "ContractSpendLimitReachedError",
        "EnforcedSpendLimitReachedError",
        "HTTPNotImplementedError",
    }
    checked = 0
    for (status, _code), cls in ERROR_CLASSES.items():
        kind = map_anthropic_error(_instance(cls, status)).kind
        names = {c.__name__ for c in cls.__mro__}
        if names & permanent_despite_status:
            assert kind == "non_retryable", cls
        elif status == 400:
            assert kind in ("model", "non_retryable"), cls  # account-level 400s are permanent
        else:
            assert kind == kind_for_status(status), (cls, status, kind)
        checked += 1
    assert checked > 50


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "model"),
        (401, "non_retryable"),
        (403, "non_retryable"),
        (404, "non_retryable"),
        (408, "retryable"),
        (409, "retryable"),
        (418, "non_retryable"),
        (422, "model"),
        (429, "retryable"),
        (500, "retryable"),
        (501, "non_retryable"),
        (502, "retryable"),
        (503, "retryable"),
        (529, "retryable"),
    ],
)
def test_generic_status_error_uses_the_status(status: int, kind: str) -> None:
    assert map_anthropic_error(_instance(anthropic.APIStatusError, status)).kind == kind
    assert map_openai_error(_instance(openai.APIStatusError, status)).kind == kind


def test_unknown_subclass_maps_like_its_parent() -> None:
    class FutureRateLimit(anthropic.RateLimitError):
        pass

    assert map_anthropic_error(_instance(FutureRateLimit, 429)).kind == "retryable"


def test_specific_mappings() -> None:
    assert map_anthropic_error(_instance(anthropic.APITimeoutError, None)).kind == "retryable"
    assert map_anthropic_error(_instance(anthropic.APIConnectionError, None)).kind == "retryable"
    assert map_anthropic_error(_instance(anthropic.OverloadedError, 529)).kind == "retryable"
    assert (
        map_anthropic_error(_instance(anthropic.EnforcedSpendLimitReachedError, 429)).kind == "non_retryable"
    )
    assert map_anthropic_error(_instance(anthropic.CredentialsError, None)).kind == "non_retryable"
    assert map_openai_error(_instance(openai.APITimeoutError, None)).kind == "retryable"
    assert map_openai_error(_instance(openai.OAuthError, 401)).kind == "non_retryable"
    assert map_openai_error(_instance(openai.LengthFinishReasonError, None)).kind == "model"
