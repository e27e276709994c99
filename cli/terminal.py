"""How the command line talks to a person: progress shown only on a terminal, a table redrawn in place as its
answers land, one short line per failed target, third-party warnings kept out of the output, and help that shows no
type beside a flag.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.console import Group as Lines
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text
from typer.core import TyperCommand, TyperGroup, TyperOption

from understudy.results import PredictionResult, Status

# A failure's reason on its one line; -v or --json give it whole.
SHORT_REASON_CHARS = 100


class Steps:
    """A progress display for a run of `total` steps (None: unknown), on the error console and only when that is a
    terminal: a pipe or a log file gets no spinner frames. Call it with each step's description as it starts."""

    def __init__(self, console: Console, total: int | None = None) -> None:
        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn()]
        columns.append(TimeElapsedColumn())
        self.progress = Progress(*columns, console=console, transient=True, disable=not console.is_terminal)
        self.task = self.progress.add_task("starting", total=total)
        self.started = 0

    def __call__(self, description: str) -> None:
        # A step is announced as it starts, so the ones announced before it are done.
        self.progress.update(self.task, description=description, completed=self.started)
        self.started += 1

    def __enter__(self) -> Steps:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


class Refining:
    """A table shown at once on a terminal `console` and redrawn in place (show) as better answers land, with a
    spinner line under it saying what runs meanwhile: call it with each step's description, as Steps. When it stops,
    the last table shown stays, without the spinner."""

    def __init__(self, console: Console, table: Table, description: str) -> None:
        self.table = table
        self.status = Spinner("dots", Text(description, style="dim"), style="dim")
        self.live = Live(Lines(table, self.status), console=console)

    def __call__(self, description: str) -> None:
        self.status.update(text=Text(description, style="dim"))

    def show(self, table: Table) -> None:
        """`table` in place of the one shown, and of the spinner line."""
        self.table = table
        self.live.update(table, refresh=True)

    def __enter__(self) -> Refining:
        self.live.start(refresh=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.update(self.table)
        self.live.stop()


@contextmanager
def third_party_warnings(verbose: bool) -> Iterator[None]:
    """Keep other packages' warnings (torch's profiler, timm's deprecations) out of the output unless `verbose`,
    which logs them on the error stream instead."""
    with warnings.catch_warnings():
        if verbose:
            logging.captureWarnings(True)
            logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
        else:
            warnings.simplefilter("ignore")
        try:
            yield
        finally:
            logging.captureWarnings(False)


def short_reason(error: str | None) -> str:
    """A failure's reason on one line: its first line, cut at SHORT_REASON_CHARS."""
    text = (error or "").strip()
    first = text.splitlines()[0] if text else "no reason recorded"
    return first if len(first) <= SHORT_REASON_CHARS else first[: SHORT_REASON_CHARS - 1].rstrip() + "…"


def failure_lines(results: Sequence[tuple[str, PredictionResult]], verbose: bool) -> list[str]:
    """One line per failed target, 'NAME (ID): failed: reason'; with `verbose`, the whole reason."""
    lines = []
    for name, result in results:
        if result.status != Status.failed:
            continue
        reason = (result.error or "no reason recorded").strip() if verbose else short_reason(result.error)
        lines.append(f"{name} ({result.target_id}): failed: {reason}")
    return lines


def _no_flag_types(params: list[Any]) -> list[Any]:
    # typer 0.29 shows `<bool>` beside every flag, --help included, as if it took a value; a flag's metavar is
    # what its help shows in that place. (typer carries its own click, hence Any for click's types.)
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class Command(TyperCommand):
    """A command whose help shows no type beside its flags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_types(super().get_params(ctx))


class Group(TyperGroup):
    """A group whose help shows no type beside its flags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_types(super().get_params(ctx))
