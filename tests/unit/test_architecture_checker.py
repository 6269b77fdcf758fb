"""The import-rule checker of test_architecture.py, on synthetic source trees."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest


def _load_checker() -> ModuleType:
    path = Path(__file__).with_name("test_architecture.py")
    spec = importlib.util.spec_from_file_location("airlock_architecture_checker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


checker = _load_checker()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"airlock/__init__.py": "", "layer0/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if parent != Path(".") and not (root / parent / "__init__.py").exists():
                (root / parent / "__init__.py").write_text("")
        path.write_text(textwrap.dedent(text))
    return root


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "airlock/a/__init__.py": "from airlock.a.core import run\n",
            "airlock/a/core.py": """
                def run() -> None:
                    from airlock.b import helper  # lazy
                    helper()
            """,
            "airlock/b/__init__.py": "from .util import helper\n",
            "airlock/b/util.py": "from ..a import core\n\ndef helper() -> None: ...\n",
        },
    )
    (cycle,) = checker.ImportGraph.scan(root).cycles()
    assert "package import cycle: airlock.a -> airlock.b -> airlock.a" in cycle
    assert "airlock/a/core.py:3: `from airlock.b import helper`" in cycle
    assert "airlock/b/util.py:1: `from ..a import core`" in cycle


def test_a_cycle_through_a_type_checking_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "airlock/a/__init__.py": "from airlock.c import Thing\n",
            "airlock/c/__init__.py": """
                from typing import TYPE_CHECKING

                if TYPE_CHECKING:
                    from airlock.a import Other

                class Thing: ...
            """,
        },
    )
    (cycle,) = checker.ImportGraph.scan(root).cycles()
    assert "airlock.a -> airlock.c -> airlock.a" in cycle
    assert "airlock/c/__init__.py:5: `from airlock.a import Other`" in cycle


def test_a_longer_cycle_names_every_hop_and_layer0_is_one_package(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "layer0/_wire.py": "import airlock.spec\n",
            "airlock/spec.py": "import airlock.errors\n",
            "airlock/errors.py": "from layer0 import _wire\n",
            "airlock/d/__init__.py": "import layer0\n",  # into the cycle, not part of it
        },
    )
    (cycle,) = checker.ImportGraph.scan(root).cycles()
    assert "package import cycle: airlock.errors -> layer0 -> airlock.spec -> airlock.errors" in cycle
    assert "airlock.d" not in cycle


def test_an_acyclic_tree_passes(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "airlock/a/__init__.py": "from airlock.b import x\nfrom . import _impl\n",
            "airlock/a/_impl.py": "from ._more import y\nimport layer0\n",
            "airlock/a/_more.py": "y = 1\n",
            "airlock/b/__init__.py": "import os\nx = 1\n",
        },
    )
    graph = checker.ImportGraph.scan(root)
    assert graph.cycles() == [] and graph.private_imports() == [] and graph.hidden == []
    assert ("airlock.a", "airlock.b") in graph.edges() and ("airlock.a", "layer0") in graph.edges()


def test_a_private_module_imported_from_another_package_is_reported(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "airlock/d/__init__.py": "from ._impl import y\n",  # its own package: fine
            "airlock/d/_impl.py": "y = 1\n",
            "airlock/e/__init__.py": """
                def f() -> None:
                    from airlock.d._impl import y
                    from airlock.d import _impl
                    import airlock._helpers
            """,
            "airlock/_helpers.py": "",
        },
    )
    violations = checker.ImportGraph.scan(root).private_imports()
    assert violations == [
        "airlock/e/__init__.py:3: `from airlock.d._impl import y`: "
        "airlock.e imports the private module airlock.d._impl of airlock.d",
        "airlock/e/__init__.py:4: `from airlock.d import _impl`: "
        "airlock.e imports the private module airlock.d._impl of airlock.d",
        "airlock/e/__init__.py:5: `import airlock._helpers`: "
        "airlock.e imports the private module airlock._helpers of airlock._helpers",
    ]


def test_the_generated_proto_package_is_private_to_the_wire_owners(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "airlock/_proto/runner_pb2.py": "import airlock.errors\n",  # generated: not scanned
            "airlock/wire/__init__.py": "from airlock._proto import runner_pb2\n",
            "airlock/turn/__init__.py": "from airlock._proto import runner_pb2\n",
        },
    )
    graph = checker.ImportGraph.scan(root)
    assert [v.split(": ")[0] for v in graph.private_imports(proto_owners={"airlock.wire"})] == [
        "airlock/turn/__init__.py:1"
    ]
    assert all(package != "airlock._proto" for package, _ in graph.edges())


@pytest.mark.parametrize(
    "call",
    ["importlib.import_module('airlock.d')", "import_module('layer0._wire')", "__import__('airlock.x')"],
)
def test_a_hidden_import_is_reported(tmp_path: Path, call: str) -> None:
    root = _tree(tmp_path, {"airlock/e/__init__.py": f"import importlib\n\ndef f():\n    return {call}\n"})
    (hidden,) = checker.ImportGraph.scan(root).hidden
    assert hidden.startswith(f"airlock/e/__init__.py:4: `{call}`")


def test_a_dynamic_import_of_another_library_is_not_an_airlock_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"airlock/e/__init__.py": "import importlib\nimportlib.import_module('json')\n"})
    assert checker.ImportGraph.scan(root).hidden == []


def test_a_circle_of_modules_inside_a_package_is_found_type_only_imports_included(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "airlock/a/__init__.py": "from ._one import One\nfrom ._two import Two\n",
            "airlock/a/_one.py": "from ._two import Two\n\nclass One: ...\n",
            "airlock/a/_two.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from ._one import One
                class Two: ...
            """,
            "airlock/a/_three.py": "from airlock.a import One\n",  # through the face: not a circle
        },
    )
    packages = {m for m, p in checker.module_names(root).items() if p.name == "__init__.py"}
    (circle,) = checker.ImportGraph.scan(root).module_cycles(packages)
    assert circle.startswith("module circle in airlock.a: ")
    assert "airlock.a._one" in circle and "airlock.a._two" in circle and "_three" not in circle
    assert "airlock/a/_two.py:4: `from ._one import One`" in circle
