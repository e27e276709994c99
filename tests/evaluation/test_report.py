"""The report built from scored rows and the files written from it, checked against hand-computed values."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evaluation.report import build_report, render_markdown, write_report
from evaluation.rows import EvalRow

MakeRow = Callable[..., EvalRow]
ESTIMATORS = ["alpha", "beta"]
META = {"command": "understudy evaluate --sample 5", "software": {"torch": "2.9.1"}, "host": "H200", "sample": "5"}


# The rows and their report are only read, so one of each serves the module.
@pytest.fixture(scope="module")
def rows(make_row: MakeRow) -> list[EvalRow]:
    resnet = {"model": "resnet50", "resolution": 224, "mode": "infer", "workload_key": "r"}
    vit = {"model": "vit_small_patch16_224", "resolution": 384, "mode": "train", "workload_key": "v"}
    return [
        # alpha APE: 10, 10, 0, 20        beta APE: 0, 25, (out of memory), 10
        make_row("T1", 10.0, {"alpha": 11.0, "beta": 10.0}, **resnet),
        make_row("T2", 20.0, {"alpha": 18.0, "beta": 25.0}, **resnet),
        make_row("T1", 40.0, {"alpha": 40.0, "beta": None}, outcome={"beta": "oom"}, note="a|b", **vit),
        make_row("T2", 50.0, {"alpha": 60.0, "beta": 45.0}, **vit),
    ]


@pytest.fixture(scope="module")
def report(rows: list[EvalRow]) -> dict[str, Any]:
    return build_report(rows, ESTIMATORS, META)


@pytest.fixture(scope="module")
def written(report: dict[str, Any], rows: list[EvalRow], tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The report's files, written once for the tests that read them (drawing the plot is most of a write), into a
    folder that does not exist yet."""
    return write_report(report, rows, ESTIMATORS, tmp_path_factory.mktemp("report") / "out")


def test_overall_summary_uses_the_rows_where_the_estimator_has_a_number(report: dict[str, Any]) -> None:
    # alpha: (10 + 10 + 0 + 20) / 4 = 10 over 4 rows; beta: (0 + 25 + 10) / 3 = 11.667 over 3 rows
    assert report["results"]["alpha"]["overall"]["n"] == 4
    assert report["results"]["alpha"]["overall"]["mape"] == pytest.approx(10.0)
    assert report["results"]["beta"]["overall"]["n"] == 3
    assert report["results"]["beta"]["overall"]["mape"] == pytest.approx(35 / 3)


def test_ranking_counts_only_workloads_with_two_predicted_targets(report: dict[str, Any]) -> None:
    # alpha orders T1 < T2 correctly in both workloads -> two times +1; beta has both targets only for 'r' -> +1
    assert report["results"]["alpha"]["ranking"]["n_workloads"] == 2
    assert report["results"]["alpha"]["ranking"]["mean"] == pytest.approx(1.0)
    assert report["results"]["beta"]["ranking"]["n_workloads"] == 1


def test_tables_group_by_target_family_resolution_and_mode(report: dict[str, Any]) -> None:
    alpha = report["results"]["alpha"]
    # T1: (10 + 0) / 2 = 5; T2: (10 + 20) / 2 = 15
    assert alpha["by_target"]["T1"]["mape"] == pytest.approx(5.0)
    assert alpha["by_target"]["T2"]["mape"] == pytest.approx(15.0)
    assert list(alpha["by_family"]) == ["resnet", "vit"]
    assert list(alpha["by_resolution"]) == ["224", "384"]
    # train rows are the vit ones: (0 + 20) / 2 = 10
    assert alpha["by_mode"]["train"]["mape"] == pytest.approx(10.0)


def test_not_run_counts_rows_by_outcome_and_lists_them(report: dict[str, Any]) -> None:
    not_run = report["results"]["beta"]["not_run"]
    assert not_run["count"] == 1
    assert not_run["by_outcome"] == {"oom": 1}
    assert not_run["rows"] == [
        {"model": "vit_small_patch16_224", "target": "T1", "workload_key": "v", "outcome": "oom", "note": "a|b"}
    ]
    assert report["results"]["alpha"]["not_run"]["count"] == 0


def test_report_is_strict_json(report: dict[str, Any]) -> None:
    assert json.loads(json.dumps(report, allow_nan=False)) == report


def test_write_report_writes_every_file(written: list[Path]) -> None:
    names = ["report.json", "report.md", "predicted_vs_measured.png", "rows.csv", "rows.jsonl"]
    assert [path.name for path in written] == names
    assert all(path.stat().st_size > 0 for path in written)
    assert (written[0].parent / "predicted_vs_measured.png").read_bytes().startswith(b"\x89PNG")


def test_markdown_summary_has_one_column_per_estimator(report: dict[str, Any]) -> None:
    lines = render_markdown(report).splitlines()
    header = lines.index("| metric | alpha | beta |")
    assert lines[header + 2] == "| MAPE % | 10.0 | 11.7 |"


def test_markdown_group_tables_show_mape_and_count_per_estimator(report: dict[str, Any]) -> None:
    # T1: alpha (10 + 0) / 2 = 5.0 over 2 rows; beta has only the resnet row there: 0.0 over 1
    assert "| T1 | 2 | 5.0 (2) | 0.0 (1) |" in render_markdown(report).splitlines()


def test_markdown_starts_with_the_meta(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    assert "- **command**: `understudy evaluate --sample 5`" in text
    assert "- **software**: torch 2.9.1" in text
    assert text.index("**command**") < text.index("**host**") < text.index("## Summary")


def test_markdown_lists_rows_not_run_with_pipes_escaped(report: dict[str, Any]) -> None:
    assert "| beta | vit_small_patch16_224 | T1 | v | oom | a\\|b |" in render_markdown(report).splitlines()


def test_markdown_family_table_keeps_the_25_families_with_most_rows(make_row: MakeRow) -> None:
    # families fama..famz; fama has 2 rows, the rest 1: fama leads, then famb..famy by name, and famz drops
    rows = [make_row("T", 10.0, {"e": 10.0}, model=f"fam{letter}_a") for letter in "abcdefghijklmnopqrstuvwxyz"]
    rows.append(make_row("T", 10.0, {"e": 10.0}, model="fama_b"))
    text = render_markdown(build_report(rows, ["e"], {}))
    family_section = text.split("## By family")[1].split("## By resolution")[0]
    table = [line for line in family_section.splitlines() if line.startswith("| fam") and "family" not in line]
    assert len(table) == 25
    assert table[0].startswith("| fama | 2 |")
    assert table[-1].startswith("| famy | 1 |")


def test_rows_csv_has_prediction_ape_and_outcome_per_estimator(written: list[Path]) -> None:
    with (written[0].parent / "rows.csv").open(newline="") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 4
    # first row: alpha predicted 11 for 10 measured -> APE 10
    assert float(table[0]["alpha_ape"]) == pytest.approx(10.0)
    assert (table[2]["beta_predicted_ms"], table[2]["beta_ape"], table[2]["beta_outcome"]) == ("", "", "oom")


def test_rows_jsonl_has_one_record_per_row(written: list[Path]) -> None:
    records = [json.loads(line) for line in (written[0].parent / "rows.jsonl").read_text().splitlines()]
    assert [record["measured_ms"] for record in records] == [10.0, 20.0, 40.0, 50.0]
    assert records[3]["beta_ape"] == pytest.approx(10.0)  # |45 - 50| / 50 * 100


def test_plot_is_written_when_no_estimator_has_a_number(make_row: MakeRow, tmp_path: Path) -> None:
    rows = [make_row("T", 10.0, {"e": None})]
    write_report(build_report(rows, ["e"], {}), rows, ["e"], tmp_path)
    assert (tmp_path / "predicted_vs_measured.png").read_bytes().startswith(b"\x89PNG")


def test_markdown_meta_leaves_out_unset_fields_and_shortens_long_lists(make_row: MakeRow) -> None:
    meta = {"host": {"gpu_name": "H200", "driver": None, "clocks": list(range(10))}}
    text = render_markdown(build_report([make_row("T", 10.0, {"e": 10.0})], ["e"], meta))
    assert "- **host**: gpu_name H200, clocks 0, 1, 2, 3, 4, 5, 6, 7, … (10 in all)" in text
