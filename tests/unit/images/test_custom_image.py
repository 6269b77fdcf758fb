"""Custom sandbox images without Docker: requirements files, wheel tags against the image's
platform, the spec's checks, both Dockerfiles, and ``airlock images build --name``'s arguments."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.errors import ImageError
from airlock.images import CustomImageSpec, custom_dockerfile, runner_image_tag
from airlock.images._custom_image import STAGE, _kept, canonical_name, offline_dockerfile
from airlock.images._image_facts import ImageFacts
from airlock.images._requirements import parse_requirements, read_requirements
from airlock.images._wheel_tags import check_wheel_fits, parse_wheel_name
from airlock.images._wheels import WheelTarget

TARGET = WheelTarget("3.11", (2, 36), "amd64")


def wheel(directory: Path, filename: str) -> Path:
    """A (tiny, real) zip file with a wheel's name."""
    path = directory / filename
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/__init__.py", "")
    return path


# --- requirements files -------------------------------------------------------------------------


def test_requirements_keep_order_drop_comments_join_continuations_and_dedupe() -> None:
    text = (
        "# tools for the wc agent\n"
        "\n"
        "wordcount>=0.1  # the tools\n"
        "httpx[http2]==0.27.*; python_version >= '3.10'\n"
        "regex \\\n"
        "  >=2024.1,<2026\n"
        "wordcount>=0.1\n"
        "Some_Package.name~=1.4\n"
    )
    assert parse_requirements(text, "req.txt") == [
        "wordcount>=0.1",
        "httpx[http2]==0.27.*; python_version >= '3.10'",
        "regex    >=2024.1,<2026",
        "Some_Package.name~=1.4",
    ]


def test_every_bad_line_is_named_by_file_and_line() -> None:
    text = "\n".join(
        [
            "ok-package",
            "-r other.txt",
            "--index-url https://example.invalid/simple",
            "-e ./src",
            "mypkg @ https://example.invalid/mypkg-1.0-py3-none-any.whl",
            "./wheels/mypkg-1.0-py3-none-any.whl",
            "git+https://example.invalid/repo.git",
            "not a requirement at all",
            "trailing \\",
        ]
    )
    with pytest.raises(ImageError) as e:
        parse_requirements(text, "tools.txt")
    lines = str(e.value).splitlines()
    assert lines[0] == "invalid requirements:"
    assert [line.split(": ", 1)[0] for line in lines[1:]] == [f"tools.txt:{n}" for n in range(2, 10)]
    assert "pip options are not supported here" in lines[1] and "--find-links" in lines[2]
    assert all("direct references (URLs, paths) are not supported" in line for line in lines[4:7])
    assert "--wheel FILE" in lines[4]
    assert lines[7] == (
        "tools.txt:8: 'not a requirement at all' is not a requirement (name[extras] [version specifiers] "
        "[; marker])"
    )
    assert lines[8] == "tools.txt:9: the file ends in a line continuation (a trailing backslash)"


def test_an_unreadable_requirements_file(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"cannot read the requirements file .*nope\.txt"):
        read_requirements(tmp_path / "nope.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ImageError, match="cannot read the requirements file"):
        read_requirements(tmp_path / "bin.txt")


# --- wheels against the image's platform -------------------------------------------------------


def test_wheel_names_parse_with_compressed_tag_sets() -> None:
    name = parse_wheel_name("my_pkg-1.0.post1-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    assert (name.name, name.version) == ("my_pkg", "1.0.post1")
    assert name.platform == ("manylinux_2_17_x86_64", "manylinux2014_x86_64")
    with pytest.raises(ImageError, match="is not a wheel file name"):
        parse_wheel_name("my_pkg-1.0.tar.gz")


@pytest.mark.parametrize(
    "filename",
    [
        "wordcount-0.1.0-py3-none-any.whl",
        "six-1.16.0-py2.py3-none-any.whl",
        "fast-2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "fast-2.0-cp311-cp311-manylinux_2_36_x86_64.whl",
        "stable-1.0-cp38-abi3-manylinux2014_x86_64.whl",
        "local-1.0-cp311-cp311-linux_x86_64.whl",
        "pure-1.0-py311-none-any.whl",
    ],
)
def test_wheels_that_fit_the_image(tmp_path: Path, filename: str) -> None:
    assert check_wheel_fits(wheel(tmp_path, filename), TARGET).name == filename.split("-")[0]


@pytest.mark.parametrize(
    ("filename", "tags"),
    [
        ("fast-2.0-cp312-cp312-manylinux_2_17_x86_64.whl", "cp312-cp312-manylinux_2_17_x86_64"),
        ("fast-2.0-cp311-cp311-manylinux_2_17_aarch64.whl", "cp311-cp311-manylinux_2_17_aarch64"),
        ("fast-2.0-cp311-cp311-manylinux_2_38_x86_64.whl", "cp311-cp311-manylinux_2_38_x86_64"),
        ("fast-2.0-cp311-cp311-musllinux_1_2_x86_64.whl", "cp311-cp311-musllinux_1_2_x86_64"),
        ("fast-2.0-cp311-cp311-win_amd64.whl", "cp311-cp311-win_amd64"),
        ("stable-1.0-cp312-abi3-manylinux2014_x86_64.whl", "cp312-abi3-manylinux2014_x86_64"),
        ("py2only-1.0-py2-none-any.whl", "py2-none-any"),
    ],
)
def test_wheels_for_another_platform_are_refused_naming_both_sides(
    tmp_path: Path, filename: str, tags: str
) -> None:
    with pytest.raises(ImageError) as e:
        check_wheel_fits(wheel(tmp_path, filename), TARGET)
    assert str(e.value).startswith(f"wheel {filename} is built for {tags}, which the image cannot install")
    assert "CPython 3.11 on x86_64 with glibc 2.36" in str(e.value)


def test_a_missing_wheel_file(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="does not exist"):
        check_wheel_fits(tmp_path / "gone-1.0-py3-none-any.whl", TARGET)


def test_the_platforms_of_a_target() -> None:
    assert TARGET.platforms()[0] == "manylinux_2_36_x86_64"
    assert TARGET.platforms()[-1] == "manylinux2014_x86_64"
    assert TARGET.platforms(local_builds=True)[-1] == "linux_x86_64"
    assert "linux_x86_64" in TARGET.pip_args(local_builds=True)
    assert "linux_x86_64" not in TARGET.pip_args()


def test_image_facts_become_a_wheel_target() -> None:
    facts = ImageFacts(
        python="3.11", implementation="cpython", libc=("glibc", "2.36"), machine="aarch64", packages=[]
    )
    assert facts.target() == WheelTarget("3.11", (2, 36), "arm64")
    musl = facts.model_copy(update={"libc": ("", "")})
    with pytest.raises(ImageError, match="custom images are built on a CPython/glibc runner image"):
        musl.target()
    with pytest.raises(ImageError, match="machine 'riscv64'"):
        facts.model_copy(update={"machine": "riscv64"}).target()


def test_constraints_keep_what_the_image_holds_but_what_a_local_wheel_replaces() -> None:
    installed = ["airlock==0.1.0", "Word_Count==0.0.9", "httpx==0.27.2", "pydantic==2.9.0"]
    assert _kept(installed, ["word.count"]) == ["airlock==0.1.0", "httpx==0.27.2", "pydantic==2.9.0"]
    assert canonical_name("Word_Count") == canonical_name("word.count") == "word-count"


# --- the spec ------------------------------------------------------------------------------------


def test_a_spec_from_the_arguments(tmp_path: Path) -> None:
    (tmp_path / "tools.txt").write_text("regex>=2024.1\n")
    w = wheel(tmp_path, "wordcount-0.1.0-py3-none-any.whl")
    spec = CustomImageSpec.create("airlock-wc:1", requirements_file=tmp_path / "tools.txt", wheels=[w])
    assert spec.base == runner_image_tag()
    assert spec.requirements == ("regex>=2024.1",)
    assert spec.wheels == (w,)


def test_a_spec_refuses_bad_names_missing_or_duplicate_wheels_and_nothing_to_install(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("# nothing\n")
    other = tmp_path / "other"
    other.mkdir()
    w1 = wheel(tmp_path, "wordcount-0.1.0-py3-none-any.whl")
    w2 = wheel(other, "wordcount-0.1.0-py3-none-any.whl")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ImageError) as e:
        CustomImageSpec.create(
            "Airlock-WC:1",
            base="airlock-runner:0.1.0",
            wheels=[w1, w2, tmp_path / "missing-1.0-py3-none-any.whl", tmp_path / "notes.txt"],
        )
    assert str(e.value).splitlines() == [
        "image name 'Airlock-WC:1' is not a valid image reference (repository[:tag], lower case)",
        f"wheel wordcount-0.1.0-py3-none-any.whl is given twice ({w1} and {w2})",
        f"wheel {tmp_path / 'missing-1.0-py3-none-any.whl'} does not exist (or is not a file)",
        "'notes.txt' is not a wheel file name (name-version[-build]-python-abi-platform.whl)",
    ]
    with pytest.raises(ImageError, match="would replace airlock's own airlock-runner image"):
        CustomImageSpec.create("airlock-runner:mine", wheels=[w1])
    with pytest.raises(ImageError, match="nothing to install"):
        CustomImageSpec.create("airlock-wc:1", requirements_file=tmp_path / "empty.txt")


# --- the Dockerfiles ----------------------------------------------------------------------------


def test_the_offline_dockerfile(tmp_path: Path) -> None:
    w = wheel(tmp_path, "word_count-0.1.0-py3-none-any.whl")
    spec = CustomImageSpec.create("airlock-wc:1", base="airlock-runner:0.1.0", wheels=[w])
    text = offline_dockerfile(
        spec, {"airlock.custom.requirements": 'x; python_version >= "3.10" $HOME'}, "b1"
    )
    lines = text.splitlines()
    assert lines[1:4] == ["FROM airlock-runner:0.1.0", 'LABEL airlock.custom.build="b1"', "USER 0:0"]
    assert f"COPY wheels/ {STAGE}/wheels/" in lines
    run = text[text.index("RUN ") : text.index("USER 65534:65534")]
    assert (
        f"--no-index --find-links {STAGE}/wheels -r {STAGE}/requirements.txt {STAGE}/wheels/{w.name}" in run
    )
    assert f"-c {STAGE}/constraints.txt" in run
    assert "grep -v -i -E '^(word[-_.]+count)=='" in run  # a local wheel may replace its own distribution
    assert "--invalidation-mode unchecked-hash" in run and f"rm -rf {STAGE}" in run
    assert "http" not in run  # nothing is fetched in the build
    assert lines[-2] == "USER 65534:65534"
    assert lines[-1] == 'LABEL airlock.custom.requirements="x; python_version >= \\"3.10\\" \\$HOME"'


def test_the_registry_dockerfile_installs_from_the_index_on_the_runner_image(tmp_path: Path) -> None:
    (tmp_path / "tools.txt").write_text("regex>=2024.1\n")
    w = wheel(tmp_path, "wordcount-0.1.0-py3-none-any.whl")
    spec = CustomImageSpec.create("airlock-wc:1", requirements_file=tmp_path / "tools.txt", wheels=[w])
    text = custom_dockerfile(spec)
    assert f"FROM {runner_image_tag()}\n" in text
    assert "docker build -t airlock-wc:1 ." in text
    assert f"COPY tools.txt wordcount-0.1.0-py3-none-any.whl {STAGE}/\n" in text
    assert f"--only-binary=:all: -r {STAGE}/tools.txt {STAGE}/wordcount-0.1.0-py3-none-any.whl" in text
    assert "--no-index" not in text
    assert "USER 65534:65534" in text
    assert 'airlock.custom.requirements="regex>=2024.1"' in text


# --- the command's arguments --------------------------------------------------------------------


def test_the_command_prints_the_registry_dockerfile_without_docker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")  # never asked
    w = wheel(tmp_path, "wordcount-0.1.0-py3-none-any.whl")
    result = CliRunner().invoke(
        app,
        [
            "images",
            "build",
            "--name",
            "airlock-wc:1",
            "--wheel",
            str(w),
            "--base",
            "reg.example/runner:1",
            "--dockerfile",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "FROM reg.example/runner:1\n" in result.stdout
    assert f"{STAGE}/wordcount-0.1.0-py3-none-any.whl" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wheel", "x.whl"], "--wheel go(es) with --name"),
        (["--dockerfile", "--no-index"], "--no-index, --dockerfile go(es) with --name"),
        (["--name", "airlock-wc:1", "--image", "runner"], "--image and --source build airlock's own"),
        (["--name", "airlock-wc:1"], "nothing to install"),
        (["--name", "airlock-wc:1", "--wheel", "/nonexistent/w-1.0-py3-none-any.whl"], "does not exist"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["images", "build", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_a_bad_requirements_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "tools.txt"
    path.write_text("wordcount\n--extra-index-url https://example.invalid\n")
    result = CliRunner().invoke(
        app, ["images", "build", "--name", "airlock-wc:1", "--requirements", str(path)]
    )
    assert result.exit_code == 2, result.output
    assert (
        f"{path}:2: '--extra-index-url https://example.invalid': pip options are not supported"
        in result.output
    )
