"""Reading ground-truth files for `understudy evaluate`: a row whose numbers cannot be read is reported and left out,
and a whole number written as a float is read as that number."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from evaluation.evaluate import read_rows

HEADER = "target,model,mode,precision,batch_size,resolution,memory_format,optimizer,latency_ms,software,source\n"


def _file(tmp_path: Path, *rows: str) -> Path:
    """A ground-truth file of resnet18 rows, each given as "batch,resolution,latency"."""
    path = tmp_path / "gt.csv"
    lines = []
    for row in rows:
        batch, resolution, latency = row.split(",")
        lines.append(f"GeForce RTX 3090,resnet18,infer,amp-fp16,{batch},{resolution},nchw,none,{latency},"
                     "torch 2.4.0,x\n")
    path.write_text(HEADER + "".join(lines))
    return path


def test_a_batch_written_as_a_float_is_read_as_the_whole_number(tmp_path: Path) -> None:
    rows = read_rows([_file(tmp_path, "48.0,224.0,12.5")])
    assert [(r["batch_size"], r["resolution"], r["latency_ms"]) for r in rows] == [("48", "224", "12.5")]


def test_rows_with_empty_or_fractional_numbers_are_skipped_and_said(tmp_path: Path) -> None:
    skipped: list[str] = []
    rows = read_rows([_file(tmp_path, "64,224,10.0", ",224,10.0", "48.5,224,10.0", "64,224,")], skipped=skipped)
    assert [r["batch_size"] for r in rows] == ["64"]
    assert skipped == ["gt.csv line 3: batch_size '' is not a number",
                       "gt.csv line 4: batch_size '48.5' is not a whole number of at least 1",
                       "gt.csv line 5: latency_ms '' is not a number"]


def test_evaluate_goes_on_past_an_unreadable_row_and_lists_it(tmp_path: Path) -> None:
    from cli.main import cli

    path = _file(tmp_path, "64.0,224,10.0", "sixty-four,224,10.0")
    result = CliRunner().invoke(cli, ["evaluate", str(path), "--out", str(tmp_path / "out"),
                                      "--estimators", "analytic"])
    assert result.exit_code == 0, result.output
    assert "skipped 1 row(s) that cannot be read" in result.output
    assert "gt.csv line 3: batch_size 'sixty-four' is not a number" in result.output
    assert "64" in (tmp_path / "out" / "rows.csv").read_text()
