"""`understudy serve`, `understudy worker` and `understudy keys`: the service's commands (filled in by issue 3)."""

from __future__ import annotations

import typer


def register(cli: typer.Typer) -> None:
    """Add the service's commands to the main command line."""
