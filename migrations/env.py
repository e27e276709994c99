"""Alembic environment: metadata from ledger.models, the URL from settings (DATABASE_URL)."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import engine_from_config, pool

from understudy.settings import Settings
from ledger.models import Base

config = context.config
target_metadata = Base.metadata

# The alembic command line logs as alembic.ini says; a program that runs the migrations itself (the tests, `understudy
# serve --migrate`) keeps its own logging by setting config.attributes["configure_logger"] = False.
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    # A URL set on the Config (tests, `understudy serve --migrate`) wins over the environment; both are normalised
    # the way the service normalises them (postgresql:// means psycopg 3 here).
    given = config.get_main_option("sqlalchemy.url")
    return Settings(DATABASE_URL=given).database_url if given else Settings().database_url


def run_migrations_offline() -> None:
    context.configure(url=database_url(), target_metadata=target_metadata, literal_binds=True,
                      dialect_opts={"paramstyle": "named"}, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = engine_from_config({"sqlalchemy.url": database_url()}, prefix="sqlalchemy.",
                                     poolclass=pool.NullPool)
    with connectable.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
