"""The migrations build exactly the models' schema and take it down again."""

from __future__ import annotations

import os

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, make_url, text

from cli.service import ALEMBIC_INI
from ledger.models import Base

from .helpers import TEST_DATABASE_URL


@pytest.fixture
def scratch_url():
    """A database of its own, dropped afterwards."""
    name = f"understudy_scratch_{os.getpid()}"
    admin = create_engine(make_url(TEST_DATABASE_URL).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(TEST_DATABASE_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def alembic_config(url: str) -> Config:
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    return config


def test_upgrade_head_builds_the_models_schema_and_downgrade_base_removes_it(scratch_url):
    config = alembic_config(scratch_url)
    engine = create_engine(scratch_url)

    command.upgrade(config, "head")
    with engine.connect() as connection:
        tables = set(inspect(connection).get_table_names())
        differences = compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}),
                                       Base.metadata)
    command.downgrade(config, "base")
    with engine.connect() as connection:
        left = set(inspect(connection).get_table_names())
    engine.dispose()

    assert tables == {"alembic_version", "predictions", "api_keys", "hosts", "calibrations", "populations",
                      "prediction_owners"}
    assert differences == []
    assert left == {"alembic_version"}


def test_the_cache_key_is_unique_in_the_migrated_schema(scratch_url):
    command.upgrade(alembic_config(scratch_url), "head")
    engine = create_engine(scratch_url)

    with engine.connect() as connection:
        unique = inspect(connection).get_unique_constraints("predictions")
    engine.dispose()

    assert {"column_names": ["cache_key"]}.items() <= unique[0].items()


def test_0005_adds_the_estimate_column_and_its_downgrade_takes_only_that_away(scratch_url):
    config = alembic_config(scratch_url)
    engine = create_engine(scratch_url)

    command.upgrade(config, "0005")
    with engine.connect() as connection:
        upgraded = {column["name"] for column in inspect(connection).get_columns("predictions")}
    command.downgrade(config, "0004")
    with engine.connect() as connection:
        downgraded = {column["name"] for column in inspect(connection).get_columns("predictions")}
    engine.dispose()

    assert "estimate" in upgraded
    assert downgraded == upgraded - {"estimate"}
