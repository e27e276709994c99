"""The CLI's cache lookup in its SQLite file with the standard library alone.

A cached `understudy predict` should answer in well under a second, process start included, and importing
SQLAlchemy costs about a third of that; this reads the same `predictions` table (ledger.models) with
sqlite3 and maps rows as ledger.predictions does (PredictionResult.from_columns). Writing stays with SQLAlchemy.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from understudy.results import RESULT_ROW_COLUMNS, PredictionResult, Status

# Stored by SQLAlchemy's JSON type as text.
JSON_COLUMNS = ("host_setting", "details")
SQLITE_PREFIX = "sqlite:///"


def sqlite_path(database_url: str) -> Path | None:
    """The file of a sqlite:/// URL; None for any other database."""
    if not database_url.startswith(SQLITE_PREFIX):
        return None
    return Path(database_url.removeprefix(SQLITE_PREFIX)).expanduser()


def lookup_sqlite(path: Path, keys: list[str]) -> dict[str, PredictionResult]:
    """The final, usable results stored under these keys (a failed one is asked again); none if the file or its
    table does not exist yet."""
    if not path.is_file() or not keys:
        return {}
    columns = ", ".join(("cache_key", *RESULT_ROW_COLUMNS))
    marks = ", ".join("?" for _ in keys)
    final = [Status.done.value, Status.oom.value]
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
            connection.row_factory = sqlite3.Row
            rows = connection.execute(
                f"SELECT {columns} FROM predictions WHERE cache_key IN ({marks}) AND status IN (?, ?)",
                [*keys, *final]).fetchall()
    except sqlite3.Error:
        return {}
    found = {}
    for row in rows:
        values = {name: row[name] for name in RESULT_ROW_COLUMNS}
        for name in JSON_COLUMNS:
            values[name] = json.loads(values[name]) if values[name] else None
        found[row["cache_key"]] = PredictionResult.from_columns(values)
    return found
