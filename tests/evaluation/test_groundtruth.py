"""Loading ground-truth CSV files and sampling them reproducibly per (file, target)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evaluation.groundtruth import GROUNDTRUTH_COLUMNS, load_groundtruth, sample_rows

HEADER = ",".join(GROUNDTRUTH_COLUMNS)


def _csv(path: Path, *lines: str) -> Path:
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def _rows(file: str, target: str, count: int) -> list[dict[str, str]]:
    return [{"file": file, "target": target, "model": f"m{i}"} for i in range(count)]


def test_load_groundtruth_reads_every_row_as_text_tagged_with_its_file(tmp_path: Path) -> None:
    first = _csv(tmp_path / "a.csv", 'GeForce RTX 3090,resnet50,infer,amp-fp16,256,224,nchw,none,12.5,torch 2.4,"x, y"')
    second = _csv(tmp_path / "b.csv", "GeForce RTX 4090,vit_base_patch16_224,train,fp32,64,224,nchw,sgd,80,t,z")
    rows = load_groundtruth([first, second])
    assert [row["file"] for row in rows] == ["a.csv", "b.csv"]
    assert rows[0]["latency_ms"] == "12.5"
    assert rows[0]["source"] == "x, y"


def test_load_groundtruth_rejects_a_file_missing_a_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("target,model\nA,resnet50\n")
    with pytest.raises(ValueError, match="bad.csv.*latency_ms"):
        load_groundtruth([path])


def test_sample_keeps_at_most_n_rows_per_file_and_target() -> None:
    rows = _rows("a.csv", "A", 10) + _rows("a.csv", "B", 2) + _rows("b.csv", "A", 10)
    sample = sample_rows(rows, 3, seed=0)
    per_group = Counter((r["file"], r["target"]) for r in sample)
    assert per_group == {("a.csv", "A"): 3, ("a.csv", "B"): 2, ("b.csv", "A"): 3}


def test_sample_is_the_same_for_the_same_seed_and_differs_for_another() -> None:
    rows = _rows("a.csv", "A", 50)
    assert sample_rows(rows, 5, seed=1) == sample_rows(rows, 5, seed=1)
    assert sample_rows(rows, 5, seed=1) != sample_rows(rows, 5, seed=2)


def test_sample_of_a_group_does_not_depend_on_other_groups() -> None:
    group = _rows("a.csv", "A", 50)
    alone = sample_rows(group, 5, seed=7)
    beside_another = [r for r in sample_rows(_rows("b.csv", "B", 50) + group, 5, seed=7) if r["file"] == "a.csv"]
    assert alone == beside_another


def test_sample_keeps_rows_in_input_order() -> None:
    rows = _rows("a.csv", "A", 50)
    sample = sample_rows(rows, 10, seed=3)
    assert sample == sorted(sample, key=rows.index)


def test_sample_of_none_keeps_every_row() -> None:
    rows = _rows("a.csv", "A", 4)
    assert sample_rows(rows, None, seed=0) == rows
