"""airlock.weave's public names."""

from __future__ import annotations

import airlock.weave as weave
from airlock.errors import AirlockError


def test_all_names_exist_and_are_exactly_the_public_surface() -> None:
    for name in weave.__all__:
        assert hasattr(weave, name), name
    public = {n for n in dir(weave) if not n.startswith("_")}
    assert public == set(weave.__all__)


def test_weave_error_is_an_airlock_error() -> None:
    assert issubclass(weave.WeaveError, AirlockError)
