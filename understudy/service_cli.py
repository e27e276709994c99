"""`understudy serve`, `understudy worker` and `understudy keys`: the service's commands.

serve runs the API (uvicorn, app.main:app); worker runs one GPU's worker (worker.main); keys manages API keys.
All of them read DATABASE_URL, REDIS_URL and UNDERSTUDY_* from the environment (understudy/settings.py).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from understudy.settings import get_settings

console = Console(stderr=True)
keys_cli = typer.Typer(add_completion=False, no_args_is_help=True, help="Create, list and revoke API keys.")

ALEMBIC_INI = Path(__file__).resolve().parents[1] / "alembic.ini"


@contextmanager
def _store_errors() -> Iterator[None]:
    """Database trouble as one readable line instead of a traceback."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    try:
        yield
    except ProgrammingError as exc:
        if type(exc.orig).__name__ != "UndefinedTable":
            raise
        console.print("[red]error:[/red] the database has no Understudy tables yet: run `alembic upgrade head`")
        raise typer.Exit(1) from None
    except OperationalError as exc:
        console.print(f"[red]error:[/red] cannot reach the database (DATABASE_URL): {str(exc.orig).strip()}")
        raise typer.Exit(1) from None


@contextmanager
def _redis_errors() -> Iterator[None]:
    from redis.exceptions import ConnectionError as RedisConnectionError

    try:
        yield
    except RedisConnectionError as exc:
        console.print(f"[red]error:[/red] cannot reach Redis (REDIS_URL): {exc}")
        raise typer.Exit(1) from None


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def migrate(database_url: str, wait_s: float = 60.0) -> None:
    """Wait for the database, then bring its schema to the newest migration (alembic upgrade head)."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    deadline = time.monotonic() + wait_s
    engine = create_engine(database_url)
    while True:
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            break
        except OperationalError as exc:
            if time.monotonic() > deadline:
                raise typer.BadParameter(f"the database did not answer within {wait_s:g} s: {exc}") from None
            time.sleep(1)
    engine.dispose()
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")


def serve(
    host: Annotated[Optional[str], typer.Option(help="address to listen on [UNDERSTUDY_API_HOST]")] = None,
    port: Annotated[Optional[int], typer.Option(help="port [UNDERSTUDY_API_PORT]")] = None,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes")] = 1,
    run_migrations: Annotated[bool, typer.Option("--migrate/--no-migrate",
                                                 help="wait for the database and run alembic upgrade head "
                                                      "first")] = False,
    log_level: Annotated[str, typer.Option(help="debug|info|warning|error")] = "info",
) -> None:
    """Run the HTTP API (it records requests and queues jobs; it never touches a GPU)."""
    import uvicorn

    settings = get_settings()
    _logging(log_level)
    if run_migrations:
        migrate(settings.database_url)
    uvicorn.run("app.main:app", host=host or settings.api_host, port=port or settings.api_port, workers=workers,
                log_level=log_level, proxy_headers=True)


def worker(
    gpu: Annotated[int, typer.Option("--gpu", help="the GPU this worker binds to (NVML index) "
                                                   "[UNDERSTUDY_WORKER_GPU]")] = -1,
    burst: Annotated[bool, typer.Option(help="stop when the queues are empty")] = False,
    wait: Annotated[Optional[float], typer.Option(help="seconds to wait for the GPU's lock when another worker "
                                                       "holds it (default: forever)")] = None,
    check: Annotated[bool, typer.Option("--check", help="only check that this machine's worker for the GPU is "
                                                        "alive (exit 0) or not (exit 1): a container healthcheck")]
    = False,
    log_level: Annotated[str, typer.Option(help="debug|info|warning|error")] = "info",
) -> None:
    """Run the worker for one GPU: an exclusive lock on it, one job at a time, each job in a fresh process."""
    from worker.main import WorkerError, healthcheck, run_worker

    settings = get_settings()
    index = settings.worker_gpu if gpu < 0 else gpu
    if check:
        with _store_errors(), _redis_errors():
            healthy, message = healthcheck(settings, index)
        console.print(message)
        raise typer.Exit(0 if healthy else 1)
    _logging(log_level)
    try:
        with _store_errors(), _redis_errors():
            code = run_worker(settings, index, burst=burst, wait_s=wait)
    except WorkerError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@keys_cli.command("create")
def keys_create(
    name: Annotated[str, typer.Option("--name", "-n", help="who or what uses the key")] = "default",
) -> None:
    """Make an API key and print it once (the store keeps only its hash)."""
    from app.security import create_api_key
    from understudy.store.db import get_engine, session_scope

    with _store_errors(), session_scope(get_engine(get_settings().database_url)) as session:
        key, token = create_api_key(session=session, name=name)
        console.print(f"created key {key.id} ({name}); send it as the X-API-Key header. It is shown only now:")
    sys.stdout.write(token + "\n")


@keys_cli.command("list")
def keys_list() -> None:
    """List API keys (id, name, prefix, created, revoked)."""
    from sqlalchemy import select

    from understudy.store.db import get_engine, session_scope
    from understudy.store.models import ApiKey

    with _store_errors(), session_scope(get_engine(get_settings().database_url)) as session:
        for key in session.scalars(select(ApiKey).order_by(ApiKey.created_at)):
            revoked = f" revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else ""
            sys.stdout.write(f"{key.id}  {key.prefix}…  {key.name}  {key.created_at:%Y-%m-%d %H:%M}{revoked}\n")


@keys_cli.command("revoke")
def keys_revoke(key: Annotated[str, typer.Argument(help="the key's id or prefix")]) -> None:
    """Revoke an API key."""
    from app.security import revoke_api_key
    from understudy.store.db import get_engine, session_scope

    with _store_errors(), session_scope(get_engine(get_settings().database_url)) as session:
        count = revoke_api_key(session=session, key_id_or_prefix=key)
    if not count:
        console.print(f"[red]error:[/red] no live key {key!r}")
        raise typer.Exit(1)
    console.print(f"revoked {count} key(s)")


def register(cli: typer.Typer) -> None:
    """Add the service's commands to the main command line."""
    cli.command()(serve)
    cli.command()(worker)
    cli.add_typer(keys_cli, name="keys")
