"""Migration 0002 adds the populations table and its downgrade removes it, leaving the rest in place."""

from __future__ import annotations

import os

from alembic import command
from alembic.config import Config
from tests.live_service import REPO, TEST_DATABASE_URL, ensure_database
from sqlalchemy import create_engine, inspect, make_url, text


def test_0002_adds_populations_and_its_downgrade_takes_only_that_away():
    ensure_database(TEST_DATABASE_URL)
    name = f"understudy_pop_migration_{os.getpid()}"
    admin = create_engine(make_url(TEST_DATABASE_URL).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(TEST_DATABASE_URL).set(database=name).render_as_string(hide_password=False)
    config = Config(str(REPO / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    engine = create_engine(url)
    try:
        command.upgrade(config, "0002")
        with engine.connect() as connection:
            upgraded = set(inspect(connection).get_table_names())
            columns = {c["name"] for c in inspect(connection).get_columns("populations")}
            foreign = inspect(connection).get_foreign_keys("populations")
        command.downgrade(config, "0001")
        with engine.connect() as connection:
            downgraded = set(inspect(connection).get_table_names())
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    assert "populations" in upgraded
    assert {"members", "ks", "summary", "status", "workload_digest", "created_by"} <= columns
    assert foreign[0]["referred_table"] == "api_keys" and foreign[0]["options"].get("ondelete") == "SET NULL"
    assert downgraded == upgraded - {"populations"}
