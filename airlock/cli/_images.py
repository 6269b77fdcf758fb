"""``airlock images build --name`` (a custom sandbox image on the runner image, or its Dockerfile)
and ``airlock images push`` (the runner and controller images to a registry)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from airlock.errors import ImageError
from layer0 import Layer0Error

if TYPE_CHECKING:
    from airlock.images import ImageBuildReport

from ._common import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, console, err_console


def print_build(report: ImageBuildReport, on: str | None = None) -> None:
    """An image build's report: up to date, or each step's seconds (built ``on`` a base)."""
    if report.skipped:
        console.print(
            f"[green]{escape(report.tag)}[/] is up to date ({report.image_id[:19]}, "
            f"{report.size_bytes / 1e6:.0f} MB); use --force to rebuild"
        )
        return
    table = Table(title=f"built {report.tag}" + (f" on {on}" if on else ""), show_header=True)
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for name, seconds in report.steps:
        table.add_row(name, f"{seconds:.1f}")
    table.add_row("[bold]total[/]", f"[bold]{report.seconds:.1f}[/]")
    console.print(table)
    console.print(f"image {report.image_id[:19]}, {report.size_bytes / 1e6:.0f} MB")
    if report.removed_previous:
        console.print(f"removed the previous image {report.removed_previous[:19]}")


def build_custom(
    name: str,
    *,
    requirements: Path | None,
    wheels: Sequence[Path],
    base: str | None,
    pip_options: Sequence[str],
    force: bool,
    dockerfile: bool,
) -> int:
    """Build the custom image (or print its registry Dockerfile); the command's exit code:
    0 built or current, 1 the build failed, 2 bad arguments (name, requirements, wheels)."""
    from airlock.images import CustomImageSpec, build_custom_image, custom_dockerfile

    try:
        spec = CustomImageSpec.create(name, base=base, requirements_file=requirements, wheels=wheels)
    except ImageError as e:
        _error(str(e))
        return EXIT_USAGE
    if dockerfile:
        print(custom_dockerfile(spec), end="")
        return EXIT_OK
    try:
        with console.status(f"building {name}", spinner="dots") as status:

            def step(message: str) -> None:
                status.update(message)
                console.log(message)

            report = asyncio.run(build_custom_image(spec, force=force, pip_options=pip_options, on_step=step))
    except (ImageError, Layer0Error) as e:
        _error(str(e))
        return EXIT_INCOMPLETE
    print_build(report, on=spec.base)
    console.print(
        f"use it in an agent's config: isolation: [{{type: container, image: {escape(name)}}}]; "
        "airlock doctor checks its custom tools import there",
        highlight=False,
    )
    return EXIT_OK


def _error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def push(registry: str, names: Sequence[str], tag: str | None) -> int:
    """Push the images named (all when none); print each pinned reference on stdout. The
    command's exit code: 0 pushed, 1 a push failed, 2 bad arguments."""
    from airlock import __version__
    from airlock.images import RECIPES, push_images, registry_repository

    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        _error(f"unknown image {', '.join(unknown)}; images: {', '.join(RECIPES)}")
        return EXIT_USAGE
    recipes = [RECIPES[n] for n in dict.fromkeys(names or RECIPES)]
    try:
        for recipe in recipes:
            registry_repository(registry, recipe)
    except ImageError as e:
        _error(str(e))
        return EXIT_USAGE
    try:
        with console.status("pushing", spinner="dots") as status:
            pushed = asyncio.run(
                push_images(registry, recipes, tag=tag or __version__, on_step=status.update)
            )
    except ImageError as e:
        _error(str(e))
        return EXIT_INCOMPLETE
    for image in pushed:
        print(image.pinned)
    err_console.print(
        "pin them in the chart's values: controller.image / sandbox.image {repository, digest}",
        highlight=False,
    )
    return EXIT_OK
