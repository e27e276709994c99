"""benchmarks/cli/new_workloads.py: the workloads a warm measuring process is timed on, drawn from a ground-truth
file: distinct models Understudy knows, in the file's mode, at batch 64; the same draw for the same seed."""

from __future__ import annotations

import csv
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script

COLUMNS = ["target", "model", "mode", "precision", "batch_size", "resolution", "memory_format", "optimizer",
           "latency_ms", "software", "source"]


@pytest.fixture
def new_workloads() -> ModuleType:
    return load_script("benchmarks/cli/new_workloads.py")


def timm_file(path: Path) -> Path:
    rows = [("resnet50", "224"), ("resnet50", "288"), ("vit_small_patch16_224", "224"), ("efficientnet_b0", "256"),
            ("not_a_timm_model", "224"), ("resnet34", "")]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for model, resolution in rows:
            writer.writerow(["GeForce RTX 3090", model, "train", "amp-fp16", "256", resolution, "nchw",
                             "sgd-nesterov", "100.0", "torch 1.12", "timm"])
    return path


def test_the_draw_is_distinct_known_models_at_batch_64_in_the_files_mode(new_workloads: ModuleType,
                                                                       tmp_path: Path) -> None:
    drawn = new_workloads.draw(timm_file(tmp_path / "train.csv"), per_file=10, seed=0)
    # the unknown model and the row with no resolution are left out; resnet50 once, at its smallest resolution
    assert sorted(w["model"] for w in drawn) == ["efficientnet_b0", "resnet50", "vit_small_patch16_224"]
    assert {w["mode"] for w in drawn} == {"train"} and {w["batch_size"] for w in drawn} == {64}
    assert next(w["resolution"] for w in drawn if w["model"] == "resnet50") == (224, 224)


def test_the_same_seed_draws_the_same_workloads(new_workloads: ModuleType, tmp_path: Path) -> None:
    path = timm_file(tmp_path / "train.csv")
    assert new_workloads.draw(path, 2, seed=3) == new_workloads.draw(path, 2, seed=3)
