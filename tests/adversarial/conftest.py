"""The adversarial suite's module-scoped ``boundary``: the isolation a module's hostile
sandboxes run behind (runc, then gVisor). The hooks that file each case under its
``attack`` category and print the table are in the root conftest."""

from __future__ import annotations

import pytest

from tests.support.containers import require_isolation


@pytest.fixture(scope="module", params=["container", "gvisor"])
def boundary(request: pytest.FixtureRequest) -> str:
    """The isolation this module's hostile sandboxes run behind."""
    kind = str(request.param)
    require_isolation(kind)
    return kind
