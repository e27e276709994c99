"""`understudy serve`, `understudy worker`, `understudy keys` and `understudy population`: the service's commands.

serve runs the API (uvicorn, app.main:app); worker runs one GPU's worker (worker.main); keys manages API keys.
All of them read DATABASE_URL, REDIS_URL and UNDERSTUDY_* from the environment (understudy/settings.py).
population is a client: it asks a running service (UNDERSTUDY_URL, UNDERSTUDY_API_KEY) through the `client` package.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from understudy.settings import get_settings
from cli.terminal import Command, Group

console = Console(stderr=True)
keys_cli = typer.Typer(cls=Group, add_completion=False, no_args_is_help=True, help="Create, list and revoke API keys.")

ALEMBIC_INI = Path(__file__).resolve().parents[1] / "alembic.ini"


@contextmanager
def _store_errors() -> Iterator[None]:
    """Database trouble as one line that says what to do (no role, no database, not migrated...), not a traceback."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from ledger.db import NOT_MIGRATED, connection_problem

    try:
        yield
    except ProgrammingError as exc:
        if type(exc.orig).__name__ != "UndefinedTable":
            raise
        console.print(f"[red]error:[/red] {NOT_MIGRATED}")
        raise typer.Exit(1) from None
    except OperationalError as exc:
        console.print(f"[red]error:[/red] {escape(connection_problem(get_settings().database_url, exc))}")
        raise typer.Exit(1) from None


def _service_database() -> str:
    """DATABASE_URL, which for the service's commands must name PostgreSQL: without it they would quietly use the
    one-shot CLI's SQLite cache, which holds no keys and no workers."""
    url = get_settings().database_url
    if url.startswith("sqlite"):
        given = "is not set" if "DATABASE_URL" not in os.environ else f"names a SQLite file ({url})"
        console.print("[red]error:[/red] " + escape(
            f"DATABASE_URL {given}: the service keeps its keys, predictions and workers in PostgreSQL; export "
            'DATABASE_URL=postgresql://ROLE:PASSWORD@HOST:5432/DATABASE (README, "Running the service")'))
        raise typer.Exit(2)
    return url


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
    """Wait for the database, then bring its schema to the newest migration (alembic upgrade head). A database that
    answers but refuses (no such role or database, a wrong password) is an error at once: waiting will not help."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    from ledger.db import connection_problem, server_unreachable

    deadline = time.monotonic() + wait_s
    engine = create_engine(database_url)
    while True:
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            break
        except OperationalError as exc:
            if not server_unreachable(exc):
                raise typer.BadParameter(connection_problem(database_url, exc)) from None
            if time.monotonic() > deadline:
                raise typer.BadParameter(f"the database did not answer within {wait_s:g} s: "
                                         f"{connection_problem(database_url, exc)}") from None
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
    database_url = _service_database()
    _logging(log_level)
    if run_migrations:
        migrate(database_url)
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
    _service_database()
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


@keys_cli.command("create", cls=Command)
def keys_create(
    name: Annotated[str, typer.Option("--name", "-n", help="who or what uses the key")] = "default",
    admin: Annotated[bool, typer.Option("--admin", help="sees every owner's rows and manages keys")] = False,
) -> None:
    """Make an API key and print it once (the store keeps only its hash). A key sees the predictions,
    populations and calibrations it made; an admin key sees all of them and manages keys."""
    from app.security import create_api_key
    from ledger.db import get_engine, session_scope

    with _store_errors(), session_scope(get_engine(_service_database())) as session:
        key, token = create_api_key(session=session, name=name, admin=admin)
        scope = "an admin key" if admin else "a key"
        console.print(f"created {scope} {key.id} ({name}); send it as the X-API-Key header. It is shown only now:")
    sys.stdout.write(token + "\n")


@keys_cli.command("list", cls=Command)
def keys_list() -> None:
    """List API keys (id, name, prefix, created, revoked)."""
    from sqlalchemy import select

    from ledger.db import get_engine, session_scope
    from ledger.models import ApiKey

    with _store_errors(), session_scope(get_engine(_service_database())) as session:
        for key in session.scalars(select(ApiKey).order_by(ApiKey.created_at)):
            revoked = f" revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else ""
            admin = "  admin" if key.admin else ""
            sys.stdout.write(f"{key.id}  {key.prefix}…  {key.name}  {key.created_at:%Y-%m-%d %H:%M}{admin}{revoked}\n")


@keys_cli.command("revoke", cls=Command)
def keys_revoke(key: Annotated[str, typer.Argument(help="the key's id or prefix")]) -> None:
    """Revoke an API key."""
    from app.security import revoke_api_key
    from ledger.db import get_engine, session_scope

    with _store_errors(), session_scope(get_engine(_service_database())) as session:
        count = revoke_api_key(session=session, key_id_or_prefix=key)
    if not count:
        console.print(f"[red]error:[/red] no live key {key!r}")
        raise typer.Exit(1)
    console.print(f"revoked {count} key(s)")


def _device_items(devices: list[str], devices_file: Optional[Path]) -> list[dict[str, Any]]:
    """--device TARGET=AMOUNT (whole numbers are counts, any fraction makes them weights) and --devices-file."""
    items: list[dict[str, Any]] = []
    if devices_file is not None:
        try:
            loaded = json.loads(devices_file.read_text())
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(f"cannot read {devices_file}: {exc}", param_hint="--devices-file") from None
        if not isinstance(loaded, list):
            raise typer.BadParameter("a JSON list of {target, weight or count}", param_hint="--devices-file")
        items.extend(loaded)
    pairs = []
    for device in devices:
        target, _, amount = device.rpartition("=")
        try:
            value = float(amount)
        except ValueError:
            raise typer.BadParameter(f"{device!r}: write TARGET=COUNT or TARGET=WEIGHT",
                                     param_hint="--device") from None
        pairs.append((target.strip(), value))
    as_counts = all(value.is_integer() for _, value in pairs)
    items.extend({"target": target, "count": int(value)} if as_counts else {"target": target, "weight": value}
                 for target, value in pairs)
    if not items:
        raise typer.BadParameter("give the population: --device TARGET=COUNT (repeatable) or --devices-file")
    return items


def _measurements(measured: list[str]) -> dict[str, float]:
    """--measured TARGET=MS, the step time of the population's workload measured on that GPU."""
    found: dict[str, float] = {}
    for item in measured:
        target, _, ms = item.rpartition("=")
        try:
            found[target.strip()] = float(ms)
        except ValueError:
            raise typer.BadParameter(f"{item!r}: write TARGET=MS, e.g. rtx-3090=41.5",
                                     param_hint="--measured") from None
    return found


def population(
    # typer reads list defaults and never mutates them; it has no default_factory (hence the B006 noqa below).
    model: Annotated[str, typer.Argument(help="a timm model name")],
    device: Annotated[list[str], typer.Option("--device", "-d", help="TARGET=COUNT or TARGET=WEIGHT (repeatable); "
                                                                     "whole numbers are counts")] = [],  # noqa: B006
    devices_file: Annotated[Optional[Path], typer.Option(help="JSON list of {target, weight or count}; inline "
                                                              "target specs allowed")] = None,
    k: Annotated[list[int], typer.Option("--k", "-k", help="clients per round (repeatable)")] = [10],  # noqa: B006
    batch_size: Annotated[int, typer.Option("--batch-size", "-b")] = 32,
    resolution: Annotated[int, typer.Option("--resolution", "-r")] = 224,
    precision: Annotated[str, typer.Option(help="fp32|amp-fp16|amp-bf16|fp16|bf16 (FL clients train in fp32)")
                         ] = "fp32",
    mode: Annotated[str, typer.Option(help="train|infer")] = "train",
    optimizer: Annotated[str, typer.Option(help="none|sgd|sgd-nesterov|adamw")] = "sgd",
    estimator: Annotated[Optional[str], typer.Option(help="spec|flops|analytic|hostaware (default: the "
                                                          "service's); with --measured, the base they calibrate")
                         ] = None,
    measured: Annotated[list[str], typer.Option(help="TARGET=MS: a step time of this workload measured on a catalog "
                                                     "GPU (repeatable); calibrates every device")] = [],  # noqa: B006
    deadline_ms: Annotated[Optional[float], typer.Option(help="a round-time deadline: also print the chance each "
                                                              "K meets it")] = None,
    confidence: Annotated[float, typer.Option(help="with --deadline-ms: the most clients per round that meet it "
                                                   "with this probability")] = 0.9,
    url: Annotated[Optional[str], typer.Option(envvar="UNDERSTUDY_URL", help="the service (default: "
                                                                             "UNDERSTUDY_API_HOST:_PORT)")] = None,
    api_key: Annotated[Optional[str], typer.Option(envvar="UNDERSTUDY_API_KEY", help="X-API-Key")] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the predictions")] = 600.0,
    as_json: Annotated[bool, typer.Option("--json", help="print the service's JSON answer")] = False,
    trace: Annotated[Optional[str], typer.Option(help="also write an FL trace: fedscale|fedscale_avail|oort|flgo|"
                                                      "appfl|csv|json (with --out)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="where --trace writes")] = None,
    clients: Annotated[int, typer.Option(help="--trace: clients drawn from the fleet")] = 100,
    rounds: Annotated[int, typer.Option(help="--trace: rounds")] = 10,
    seed: Annotated[int, typer.Option(help="--trace: the seed (the same seed, the same trace)")] = 0,
    local_steps: Annotated[Optional[int], typer.Option(help="--trace: local steps per round (default 20)")] = None,
    sigma: Annotated[Optional[float], typer.Option(help="--trace: lognormal sigma of a round (default: from the "
                                                        "measured spread)")] = None,
    availability: Annotated[float, typer.Option(help="--trace: P(a client is available)")] = 1.0,
    dropout: Annotated[float, typer.Option(help="--trace: P(an available client drops out)")] = 0.0,
    link: Annotated[list[str], typer.Option(help="--trace: TARGET=DOWN/UP or KIND=DOWN/UP in Mbit/s "
                                                 "(repeatable)")] = [],  # noqa: B006
) -> None:
    """Ask a running service for MODEL's latency over a device population: weighted p50/p90/p99, the slowest
    devices and the expected round time when K clients are sampled at random; with --trace, write a per-client FL
    trace for FedScale, Oort, FLGo, APPFL (or CSV, JSON) to --out."""
    from rich.table import Table

    from client import ApiError, Client, ClientError
    from understudy.populations import DeviceLatency, max_clients_within, prob_round_within

    settings = get_settings()
    base = url or f"http://{settings.api_host}:{settings.api_port}"
    workload = {"model": model, "mode": mode, "batch_size": batch_size, "resolution": resolution,
                "precision": precision, "optimizer": optimizer}
    items = _device_items(device, devices_file)
    measurements = _measurements(measured)
    if trace is not None and out is None:
        raise typer.BadParameter("--trace writes a file: give --out FILE", param_hint="--out")
    try:
        with Client(base, api_key) as client:
            result = client.population(workload, items, k=k, estimator=estimator, measurements=measurements,
                                       timeout=timeout)
            if trace is not None and out is not None and result.status == "done":
                config = {"local_steps": local_steps, "sigma": sigma, "availability": availability,
                          "dropout": dropout}
                body = client.population_trace(result.id, format=trace, clients=clients, rounds=rounds, seed=seed,
                                               config={**config, "link": link} if link else config)
                out.write_bytes(body)
    except ApiError as exc:
        console.print(f"[red]error:[/red] {exc.detail}")
        raise typer.Exit(2 if exc.status_code == 422 else 1) from None
    except ClientError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        return
    table = Table(title=f"{model} {mode} {precision} b{batch_size} {resolution}px over {len(result.devices)} "
                        f"device kind(s), {result.estimator}")
    for column in ("device", "share", "step ms", "status"):
        table.add_column(column)
    for item in sorted(result.devices, key=lambda d: (d.latency_ms is None, d.latency_ms or 0.0)):
        latency = f"{item.latency_ms:.3f}" if item.latency_ms is not None else "-"
        table.add_row(item.target_name or item.target_id, f"{item.share:.1%}", latency, item.status.value)
    Console().print(table)
    summary = result.summary
    if summary is None:
        console.print(f"[red]{result.error}[/red]")
        raise typer.Exit(1)
    lines = [f"p50 {summary.p50_ms:.3f} ms   p90 {summary.p90_ms:.3f} ms   p99 {summary.p99_ms:.3f} ms   "
             f"mean {summary.mean_ms:.3f} ms"]
    ran = [DeviceLatency(d.target_id, d.latency_ms, d.weight) for d in result.devices
           if d.status.value == "done" and d.latency_ms is not None]
    for round_ in summary.round_time:
        line = f"K={round_.k}: expected round time {round_.expected_max_ms:.3f} ms"
        if deadline_ms is not None:
            # Excluded devices cannot be picked: the chance is over the devices that run the workload.
            line += f", meets {deadline_ms:g} ms with probability {prob_round_within(ran, round_.k, deadline_ms):.3f}"
        lines.append(line)
    if deadline_ms is not None:
        most = max_clients_within(ran, deadline_ms, confidence, cap=10**9)
        if most >= 10**9:
            lines.append(f"every device kind that runs it meets {deadline_ms:g} ms: any number of clients per round")
        else:
            lines.append(f"at most {most} client(s) per round meet {deadline_ms:g} ms with probability >= "
                         f"{confidence:g}")
    for excluded in summary.excluded:
        lines.append(f"left out: {excluded.target_name or excluded.target_id} ({excluded.share:.1%}): "
                     f"{excluded.status}{f', {excluded.reason}' if excluded.reason else ''}")
    if trace is not None:
        lines.append(f"{trace} trace of {clients} clients x {rounds} rounds (seed {seed}) written to {out}")
    sys.stdout.write("\n".join(lines) + "\n")


def register(cli: typer.Typer) -> None:
    """Add the service's commands to the main command line."""
    cli.command(cls=Command)(serve)
    cli.command(cls=Command)(worker)
    cli.add_typer(keys_cli, name="keys")
    cli.command(cls=Command)(population)
