"""Bring the H200 measurement log up to two changes of hostaware 8 and analytic 7 (benchmarks/accuracy/README.md,
"hostaware 8, analytic 7: one set of rates for how GPUs differ, PyTorch 1.x workloads, serial kernels"), without
measuring again what they do not change (device time is scarce):

- Rows of PyTorch 1.x files are now workloads with `torch_major=1` (a new digest, so a new log key). On the host it
  changes only how timm builds attention (the host's optimizer is its own PyTorch's, whatever the target's; at the
  training file's batch sizes its step is about 1 % of the host's time). A model with no attention layer builds the
  very same step either way: its earlier measurement is entered again under the new key. A model with attention
  runs another step; only a new measurement serves it.
- TF32 kernels are now tensor-core time in the host's kernel profile (engine.timing.kernel_class). Only an fp32
  step runs them, so an fp32 workload is served only by a new measurement; an AMP one keeps its earlier profile.

    python benchmarks/accuracy/merge_remeasured.py benchmarks/accuracy/h200-measurements.jsonl \
        ../shared/groundtruth/timm-train-amp-nchw-rtx3090-pt112.csv ../shared/groundtruth/lambda-resnet50-train.csv \
        --new NEW_LOG...

appends to the log (its reader keeps the last record of a key) the new measurements, then the earlier ones entered
again, and prints what it did.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from understudy.results import HostSetting
from understudy.workload import Workload, workload_from_row
from engine.measurement_log import MeasurementLog
from engine.workloads import build_model
from evaluation.evaluate import read_rows


def has_attention(workload: Workload) -> bool:
    """Whether the model holds a layer that timm's fused-attention switch changes (built on the meta device)."""
    model = build_model(workload, "meta")
    return any(hasattr(module, "fused_attn") for module in model.modules())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--new", nargs="+", type=Path, required=True, help="logs measured with this code")
    args = parser.parse_args()
    log = MeasurementLog(args.log)
    host = log.only_host()
    setting = HostSetting(profile=True)
    fresh = [MeasurementLog(path) for path in args.new]
    for other in fresh:
        if other.only_host().fingerprint != host.fingerprint:
            raise SystemExit(f"{other.path} was measured on another host")
    done: set[str] = set()
    counts = {"new": 0, "entered again": 0, "left out": 0}
    for row in read_rows(args.files):
        try:
            workload = workload_from_row(row)
        except ValueError:
            continue  # a model this timm lacks
        if workload.digest() in done:
            continue
        done.add(workload.digest())
        found = next((m for other in fresh if (m := other.get(host, workload, setting)) is not None), None)
        if found is not None:
            log.put(host, workload, setting, found)
            counts["new"] += 1
            continue
        earlier = log.get(host, workload.model_copy(update={"torch_major": 2}), setting)
        if earlier is None or workload.torch_major == 2:
            continue
        if workload.precision == "fp32" or has_attention(workload):
            counts["left out"] += 1
            print(f"left out (needs a new measurement): {workload.label}")
            continue
        log.put(host, workload, setting, earlier)
        counts["entered again"] += 1
    print(counts)


if __name__ == "__main__":
    main()
