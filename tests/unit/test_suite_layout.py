"""The test suite's own rules: every test folder is a package, nothing imports from a conftest,
conftests hold only fixtures and hooks, and the markers say what a test needs (Docker and the
real model live in tests/integration/, marked)."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
#: Folders of data or stand-in modules put on a child process's path, not test code.
NOT_PACKAGES = {TESTS / "unit" / "localmodel" / "fake_runtime"}
#: What a module that needs the Docker engine names: the integration fixtures or the backend.
DOCKER_NAMES = {"docker_client", "runner_image", "DockerEnvironment"}


def python_files() -> Iterator[Path]:
    for path in sorted(TESTS.rglob("*.py")):
        if not any(path.is_relative_to(d) for d in NOT_PACKAGES):
            yield path


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def marks(tree: ast.Module) -> set[str]:
    """The ``pytest.mark.<name>`` names used anywhere in a module."""
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "mark"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "pytest"
    }


def module_marks(tree: ast.Module) -> set[str]:
    """The marks of the module's ``pytestmark`` (every test in it carries them)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return marks(ast.Module(body=[ast.Expr(node.value)], type_ignores=[]))
    return set()


def test_every_folder_with_python_code_is_a_package() -> None:
    folders = {path.parent for path in python_files()}
    missing = sorted(str(f.relative_to(TESTS.parent)) for f in folders if not (f / "__init__.py").exists())
    assert not missing, f"add an __init__.py to: {missing}"


def test_no_test_package_shadows_a_top_level_module() -> None:
    """A child process started with a test folder as its working directory (``python -m …``
    puts the cwd first on sys.path) must still import the real package of that name."""
    names = {path.parent.name for path in python_files() if path.parent != TESTS}
    found = {name: importlib.util.find_spec(name) for name in names}
    # A plain directory (a namespace package, no origin) shadows nothing: a package wins over it;
    # nor does a test package found where it lives (a test put it on sys.path to import it).
    shadowing = sorted(
        name
        for name, spec in found.items()
        if spec is not None and spec.origin is not None and not Path(spec.origin).is_relative_to(TESTS)
    )
    assert not shadowing, f"rename these test folders (e.g. layer0 -> layer0_protocol): {shadowing}"


def test_nothing_imports_from_a_conftest() -> None:
    offenders = []
    for path in python_files():
        for node in ast.walk(parse(path)):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(name.split(".")[-1] == "conftest" for name in names):
                offenders.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}")
    assert not offenders, f"import from tests.support (or a helper module) instead: {offenders}"


def is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            return True
    return False


@pytest.mark.parametrize(
    "conftest", sorted(TESTS.rglob("conftest.py")), ids=lambda p: str(p.relative_to(TESTS.parent))
)
def test_conftests_hold_only_fixtures_and_hooks(conftest: Path) -> None:
    others = [
        node.name
        for node in parse(conftest).body
        if isinstance(node, ast.ClassDef)
        or (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and not is_fixture(node)
            and not node.name.startswith("pytest_")
        )
    ]
    assert not others, f"move {others} to tests/support (or a helper module next to the tests)"


def test_unit_tests_need_neither_docker_nor_the_real_model() -> None:
    marked = [
        str(path.relative_to(TESTS.parent))
        for path in python_files()
        if path.is_relative_to(TESTS / "unit") and marks(parse(path)) & {"docker", "slow"}
    ]
    assert not marked, f"tests marked docker or slow belong in tests/integration/: {marked}"


def test_integration_and_adversarial_modules_that_use_docker_are_marked_docker() -> None:
    unmarked = []
    for path in sorted(
        [*(TESTS / "integration").glob("test_*.py"), *(TESTS / "adversarial").glob("test_*.py")]
    ):
        tree = parse(path)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args
        }
        if used & DOCKER_NAMES and "docker" not in module_marks(tree):
            unmarked.append(path.name)
    assert not unmarked, f"add pytestmark = pytest.mark.docker to: {unmarked}"


def test_every_adversarial_module_files_its_cases_under_a_category() -> None:
    unfiled = [
        path.name
        for path in sorted((TESTS / "adversarial").glob("test_*.py"))
        if "attack" not in module_marks(parse(path))
    ]
    assert not unfiled, f"add pytest.mark.attack(<category>) to the pytestmark of: {unfiled}"
