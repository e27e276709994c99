"""The shipped count table: any batch size's counts read off two traced ones, exactly as a trace counts them, and
read without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from understudy.workload import Workload
from engine import count_table
from engine.count_table import (BATCHES, AffineCounts, CountTable, bf16_counts_apart, count_affine, family_key,
                                installed_timm, shipped_counts, shipped_table, write_table)
from engine.counting import count_workload
from engine.counts import WorkloadCounts

REPO = Path(__file__).resolve().parents[2]

# Two kernels and a weight; the trace's live bytes rose to 100 and then 50 at batch 32, 300 and 900 at batch 256.
FIRST = WorkloadCounts.of_ops([("tensor", 3200.0, 640.0), ("memory", 0.0, 320.0)], param_bytes=64.0, param_count=16,
                              buffer_bytes=8.0, input_bytes=32.0 * 10, peak_live_bytes=100.0)
SECOND = WorkloadCounts.of_ops([("tensor", 25600.0, 2880.0), ("memory", 0.0, 2560.0)], param_bytes=64.0,
                               param_count=16, buffer_bytes=8.0, input_bytes=256.0 * 10, peak_live_bytes=900.0)
AFFINE = AffineCounts.of_traces(FIRST, [100, 50], SECOND, [300, 900])


def test_the_traced_batch_sizes_read_back_as_counted() -> None:
    assert BATCHES == (32, 256)
    assert AFFINE.at(32).ops == FIRST.ops
    assert AFFINE.at(256).ops == SECOND.ops


def test_another_batch_size_is_read_on_the_line_through_the_traced_ones() -> None:
    counts = AFFINE.at(64)
    # tensor: 100 FLOPs per sample; bytes 320 fixed and 10 per sample. memory: 10 bytes per sample.
    assert counts.ops == [("tensor", 6400.0, 960.0), ("memory", 0.0, 640.0)]
    assert counts.kinds["tensor"].flops == 6400.0
    assert counts.input_bytes == 640.0
    assert (counts.param_bytes, counts.param_count, counts.buffer_bytes) == (64.0, 16, 8.0)


def test_the_peak_is_the_largest_live_moment_at_that_batch_size() -> None:
    # First moment: 100 + (300 - 100) / 224 per sample beyond 32; second: 50 + 850 / 224 per sample.
    assert AFFINE.at(32).peak_live_bytes == 100.0
    assert AFFINE.at(256).peak_live_bytes == 900.0
    assert AFFINE.at(2).peak_live_bytes == pytest.approx(100.0 - 30 * 200 / 224)
    assert AFFINE.at(80).peak_live_bytes == pytest.approx(50.0 + 48 * 850 / 224)


def test_a_moment_never_the_largest_is_not_kept() -> None:
    affine = AffineCounts.of_traces(FIRST, [100, 90, 50], SECOND, [300, 290, 900])
    assert affine.peaks == AFFINE.peaks


def test_traces_that_launch_different_kernels_are_refused() -> None:
    other = WorkloadCounts.of_ops([("tensor", 25600.0, 2880.0)])
    with pytest.raises(ValueError, match="change with the batch size"):
        AffineCounts.of_traces(FIRST, [100], other, [300])


def test_the_family_leaves_the_batch_size_out_and_nothing_else() -> None:
    assert family_key(Workload(model="resnet18", batch_size=8)) == family_key(Workload(model="resnet18", batch_size=64))
    assert family_key(Workload(model="resnet18")) != family_key(Workload(model="resnet18", precision="fp32"))
    assert family_key(Workload(model="resnet18")) != family_key(Workload(model="resnet18", mode="infer"))


def test_a_written_table_serves_its_families(tmp_path: Path) -> None:
    path = tmp_path / "table.zip"
    write_table(path, [(Workload(model="resnet18", batch_size=4), AFFINE)], {"timm": "9.9"})
    table = CountTable(path)
    assert table.about == {"timm": "9.9"}
    assert table.get(Workload(model="resnet18", batch_size=100)) == AFFINE
    assert table.get(Workload(model="resnet18", mode="infer")) is None


def test_an_amp_bf16_step_without_thin_grouped_convolutions_is_read_from_its_amp_fp16_twin(tmp_path: Path) -> None:
    path = tmp_path / "table.zip"
    write_table(path, [(Workload(model="resnet18", batch_size=4), AFFINE)], {"timm": "9.9"})
    assert CountTable(path).get(Workload(model="resnet18", precision="amp-bf16")) == AFFINE


@pytest.mark.parametrize("kind", ["depthwise", "grouped"])
def test_an_amp_bf16_step_with_thin_grouped_convolutions_is_not_read_from_its_twin(tmp_path: Path, kind: str) -> None:
    """PyTorch runs those on cuDNN in fp16 and on its own kernels in bf16: the twin's kernels are not the step's."""
    with_grouped = AffineCounts.of_traces(
        WorkloadCounts.of_ops([*FIRST.ops, (kind, 10.0, 20.0)]), [100, 50],
        WorkloadCounts.of_ops([*SECOND.ops, (kind, 80.0, 160.0)]), [300, 900])
    path = tmp_path / "table.zip"
    write_table(path, [(Workload(model="mobilenetv2_100", batch_size=4), with_grouped)], {"timm": "9.9"})
    assert CountTable(path).get(Workload(model="mobilenetv2_100", precision="amp-bf16")) is None


def test_an_amp_bf16_entry_of_its_own_is_read_before_its_twin(tmp_path: Path) -> None:
    path = tmp_path / "table.zip"
    own = AffineCounts.of_traces(FIRST, [200, 50], SECOND, [600, 900])
    write_table(path, [(Workload(model="resnet18", batch_size=4), AFFINE),
                       (Workload(model="resnet18", batch_size=4, precision="amp-bf16"), own)], {"timm": "9.9"})
    assert CountTable(path).get(Workload(model="resnet18", precision="amp-bf16")) == own


def test_a_bf16_softmax_into_fp32_counts_apart_from_the_fp16_one() -> None:
    """aten fuses the cast into an fp16 softmax alone (half_to_float); a bf16 one is cast first."""
    family = Workload(model="convit_tiny", mode="infer")
    assert bf16_counts_apart(family, count_affine(family))


def test_a_bf16_step_of_the_same_kernels_does_not_count_apart() -> None:
    family = Workload(model="test_vit", mode="infer", resolution=160)
    assert not bf16_counts_apart(family, count_affine(family))


def test_an_amp_bf16_twin_is_of_the_same_memory_format(tmp_path: Path) -> None:
    path = tmp_path / "table.zip"
    write_table(path, [(Workload(model="resnet18", batch_size=4), AFFINE)], {"timm": "9.9"})
    assert CountTable(path).get(Workload(model="resnet18", precision="amp-bf16", memory_format="nhwc")) is None


def test_only_amp_bf16_is_read_from_a_twin(tmp_path: Path) -> None:
    path = tmp_path / "table.zip"
    write_table(path, [(Workload(model="resnet18", batch_size=4), AFFINE)], {"timm": "9.9"})
    assert CountTable(path).get(Workload(model="resnet18", precision="fp16")) is None


def test_the_shipped_table_was_made_with_the_installed_timm() -> None:
    """A new timm may build its models differently: the table must then be made again
    (scripts/build_count_table.py), or it goes unused."""
    table = shipped_table()
    assert table is not None, f"the shipped count table is not for the installed timm {installed_timm()}"
    assert table.about["families"] > 2000


def test_a_table_under_another_timm_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(count_table, "installed_timm", lambda: "0.0.1")
    shipped_table.cache_clear()
    try:
        assert shipped_counts(Workload(model="resnet18", batch_size=64)) is None
    finally:
        monkeypatch.undo()
        shipped_table.cache_clear()


@pytest.mark.parametrize("workload", [Workload(model="resnet18", batch_size=1),
                                      Workload(model="resnet18", batch_size=64, compile=True),
                                      Workload(model="resnet18", batch_size=64, precision="fp16"),
                                      Workload(model="resnet18", batch_size=64, resolution=320)],
                         ids=["batch of one", "compiled", "fp16", "another input size"])
def test_workloads_outside_the_table_are_counted(workload: Workload) -> None:
    assert shipped_counts(workload) is None


@pytest.mark.parametrize("workload", [Workload(model="resnet18", batch_size=48),
                                      Workload(model="mobilenetv3_small_050", mode="infer", batch_size=48),
                                      # at its own input size, the only one it takes
                                      Workload(model="test_vit", batch_size=48, resolution=160),
                                      Workload(model="resnet18", batch_size=48, precision="amp-bf16"),
                                      Workload(model="vit_small_patch16_224", mode="infer", batch_size=24,
                                               precision="amp-bf16"),
                                      # an entry of its own: its depthwise convolutions run on other kernels in bf16
                                      Workload(model="mobilenetv3_small_050", batch_size=48, precision="amp-bf16"),
                                      Workload(model="resnet18", batch_size=48, precision="fp32"),
                                      Workload(model="mobilenetv3_small_050", mode="infer", batch_size=48,
                                               precision="fp32"),
                                      Workload(model="resnet18", batch_size=48, memory_format="nhwc"),
                                      Workload(model="mobilenetv3_small_050", batch_size=48, precision="fp32",
                                               memory_format="nhwc"),
                                      Workload(model="mobilenetv3_small_050", batch_size=48, precision="amp-bf16",
                                               memory_format="nhwc"),
                                      # a norm of a 16-bit tensor into fp32 (its global response norm)
                                      Workload(model="convnextv2_atto", batch_size=48),
                                      # an entry of its own: its attention's softmax is cast first in bf16
                                      Workload(model="convit_tiny", mode="infer", batch_size=48, precision="amp-bf16")],
                         ids=["resnet18 train", "mobilenetv3_small_050 infer", "test_vit train 160px",
                              "resnet18 train amp-bf16 (its amp-fp16 entry)",
                              "vit_small infer amp-bf16 (its amp-fp16 entry)", "mobilenetv3_small_050 train amp-bf16",
                              "resnet18 train fp32", "mobilenetv3_small_050 infer fp32",
                              "resnet18 train channels-last", "mobilenetv3_small_050 train fp32 channels-last",
                              "mobilenetv3_small_050 train amp-bf16 channels-last",
                              "convnextv2_atto train", "convit_tiny infer amp-bf16"])
def test_shipped_counts_are_the_counted_ones(workload: Workload) -> None:
    shipped, counted = shipped_counts(workload), count_workload(workload)
    assert shipped is not None
    assert [kind for kind, _, _ in sorted(shipped.ops)] == [kind for kind, _, _ in sorted(counted.ops)]
    assert [v for op in sorted(shipped.ops) for v in op[1:]] == pytest.approx(
        [v for op in sorted(counted.ops) for v in op[1:]], rel=1e-12)
    assert shipped.peak_live_bytes == pytest.approx(counted.peak_live_bytes, rel=1e-12)
    assert shipped.input_bytes == counted.input_bytes
    assert shipped.param_bytes == counted.param_bytes


def test_a_made_entry_reads_other_batch_sizes_as_counted() -> None:
    affine = count_affine(Workload(model="test_efficientnet", mode="train"))
    assert affine.at(12).peak_live_bytes == count_workload(Workload(model="test_efficientnet", mode="train",
                                                                    batch_size=12)).peak_live_bytes


def test_an_answer_from_the_table_imports_no_torch(tmp_path: Path) -> None:
    """As a user runs it, with nothing cached: the analytic answer for a workload the table holds."""
    code = ("import sys\n"
            "from cli.main import main\n"
            "try:\n    main()\n"
            "finally:\n    print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)\n")
    args = [sys.executable, "-c", code, "predict", "resnet50", "--targets", "t4,rtx4090", "--estimator", "analytic",
            "--batch-size", "64", "--json", "--database-url", f"sqlite:///{tmp_path / 'cache.db'}"]
    env = {**os.environ, "UNDERSTUDY_CACHE_DIR": str(tmp_path)}
    run = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert "no torch" in run.stderr
    assert [p["status"] for p in json.loads(run.stdout)["predictions"]] == ["done", "done"]
