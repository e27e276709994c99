"""A workload's parameter count without torch: read from understudy/data/timm_params.csv, which
scripts/build_param_counts.py generates from timm (models built on the meta device), and, for torchvision's models,
understudy/data/torchvision_params.csv (scripts/build_torchvision_models.py; 3 input channels only).

    params(num_classes, in_chans) = params + per_class x (num_classes - 1000) + per_in_chan x (in_chans - 3)

The head grows linearly with the classes and the stem with the input channels; the table holds the counts at timm's
defaults (1000 classes, 3 channels) and the two slopes.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from importlib import resources
from typing import NamedTuple


class _Counts(NamedTuple):
    params: int
    per_class: float
    per_in_chan: float | None


@lru_cache(maxsize=1)
def _table() -> dict[str, _Counts]:
    table = {}
    for name in ("timm_params.csv", "torchvision_params.csv"):
        text = resources.files("understudy.data").joinpath(name).read_text()
        table.update({row["model"]: _Counts(int(row["params"]), float(row["per_class"]),
                                            float(row["per_in_chan"]) if row["per_in_chan"] else None)
                      for row in csv.DictReader(text.splitlines())})
    return table


def param_count(model: str, num_classes: int = 1000, in_chans: int = 3) -> int | None:
    """The model's parameter count as the worker builds it; None for a model the table does not hold (or whose
    stem cannot be counted for in_chans other than 3)."""
    counts = _table().get(model)
    if counts is None:
        return None
    extra = counts.per_class * (num_classes - 1000)
    if in_chans != 3:
        if counts.per_in_chan is None:
            return None
        extra += counts.per_in_chan * (in_chans - 3)
    return round(counts.params + extra)
