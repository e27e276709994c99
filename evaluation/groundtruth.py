"""Reading the ground-truth CSV files (format in shared/groundtruth/SOURCES.md) and sampling rows from them."""

from __future__ import annotations

import csv
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

GROUNDTRUTH_COLUMNS: tuple[str, ...] = (
    "target",
    "model",
    "mode",
    "precision",
    "batch_size",
    "resolution",
    "memory_format",
    "optimizer",
    "latency_ms",
    "software",
    "source",
)

# Added to every loaded row: the name of the file it came from, which sampling groups by.
FILE_COLUMN = "file"

RowT = TypeVar("RowT", bound=Mapping[str, str])


def load_groundtruth(paths: Sequence[Path]) -> list[dict[str, str]]:
    """All rows of the given files, in file then line order, values as text, each with 'file' set to the file name.

    Raises ValueError naming the file when a column of the format is missing.
    """
    rows: list[dict[str, str]] = []
    for path in paths:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [column for column in GROUNDTRUTH_COLUMNS if column not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{path}: missing ground-truth columns {', '.join(missing)}")
            rows.extend({**row, FILE_COLUMN: path.name} for row in reader)
    return rows


def sample_rows(rows: Sequence[RowT], per_file_or_target: int | None, seed: int) -> list[RowT]:
    """At most N rows of each (file, target) group, chosen at random but reproducibly; None keeps every row.

    Kept rows stay in input order. Each group draws from its own generator seeded by (seed, file, target), so the
    sample of one group does not change when other files or targets are added. Rows without a 'file' share one.
    """
    if per_file_or_target is None:
        return list(rows)
    if per_file_or_target < 0:
        raise ValueError(f"sample size must be >= 0, got {per_file_or_target}")
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        groups[(row.get(FILE_COLUMN, ""), row["target"])].append(index)
    kept: set[int] = set()
    for (file, target), indices in groups.items():
        # A str seed is hashed with SHA-512 by random.Random, so it is stable across processes (unlike hash()).
        rng = random.Random(f"{seed}|{file}|{target}")
        kept.update(rng.sample(indices, min(per_file_or_target, len(indices))))
    return [row for index, row in enumerate(rows) if index in kept]
