"""A what-if on Lambda's rows (benchmarks/accuracy/README.md, "The chips before Ampere, and a floor under
calibration"): the ratio errors of the two GPUs before Ampere (the Tesla V100, Volta, and the Quadro RTX 8000,
Turing) if those chips reached a smaller share of one unit's peak than the shipped constants say, the share chosen on
one of the two and reported on the other.

Two units are tried, each scaled by `factor` on chips of compute capability below 8.0 and on no other: the tensor
cores in 16 bit (`tensor`: a Volta or Turing convolution's tensor-core rate; their fp32 convolutions run on the
plain lanes and keep theirs) and DRAM bandwidth (`memory`: every memory-bound kernel, in every precision). The
prices are fit_constants.py's with the shipped constants ("chosen_on_all" of the committed --logo reports), hostaware
from the H200's measurements of the same workloads; nothing is refitted.

    python benchmarks/accuracy/lambda_pre_ampere.py ../shared/groundtruth/lambda-resnet50-train.csv \\
        --counts-cache benchmarks/accuracy/counts.xz --log benchmarks/accuracy/h200-measurements.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_constants as fc  # beside this script

HERE = Path(__file__).resolve().parent
FACTORS = (1.0, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5)


class PreAmpere(fc.Priced):
    """The samples priced with one unit of the pre-Ampere chips scaled by `factor`."""

    def __init__(self, samples: list[fc.Sample], unit: str, factor: float) -> None:
        super().__init__(samples)
        before_ampere = np.array([float(s.target.compute_capability or 0) < 8 for s in samples])
        sixteen_bit = np.array([s.workload.precision != "fp32" for s in samples])
        if unit == "tensor":
            scaled = (before_ampere & sixteen_bit)[self.index]
            self.tensor_rate = np.where(scaled, self.tensor_rate * factor, self.tensor_rate)
        else:
            self.bandwidth = np.where(before_ampere[self.index], self.bandwidth * factor, self.bandwidth)


def ratio_errors(kind: str, samples: list[fc.Sample], values: dict[str, float], unit: str,
                 factor: float) -> dict[str, float]:
    """Signed ratio error (%) per Lambda GPU and precision."""
    predicted = fc.predict(kind, PreAmpere(samples, unit, factor), values)
    return {f"{target} {precision}": 100 * (ratio - 1)
            for (target, precision), ratio in fc.lambda_ratios(samples, predicted).items()}


def chosen_on(errors: dict[float, dict[str, float]], row: str) -> float:
    """The factor, of FACTORS, that takes `row` nearest to no error."""
    return min(errors, key=lambda factor: abs(errors[factor][row]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lambda_csv", type=Path)
    parser.add_argument("--counts-cache", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True, help="the H200's measurements (hostaware)")
    args = parser.parse_args()
    for kind in ("hostaware", "analytic"):
        log = args.log if kind == "hostaware" else None
        samples = fc.load_samples([args.lambda_csv], log, args.counts_cache, None, [], True)
        values = json.loads((HERE / f"{kind}-logo.json").read_text())["constants"]["chosen_on_all"]
        for unit in ("tensor", "memory"):
            errors = {factor: ratio_errors(kind, samples, values, unit, factor) for factor in FACTORS}
            pre = [row for row in errors[1.0] if "V100" in row or "RTX 8000" in row]
            print(f"{kind}, pre-Ampere {unit} x factor: signed ratio error %")
            for factor, row_errors in errors.items():
                within = sum(abs(e) <= 12 for e in row_errors.values())
                cells = "  ".join(f"{row.removeprefix('NVIDIA ')} {row_errors[row]:+.1f}" for row in pre)
                print(f"  {factor:4.2f}: {cells}  ({within} of {len(row_errors)} within 12 %)")
            amp = [row for row in pre if row.endswith("amp-fp16")]
            for choose in amp:
                factor = chosen_on(errors, choose)
                print(f"  chosen on {choose.removeprefix('NVIDIA ')}: {factor:g}; "
                      + ", ".join(f"{row.removeprefix('NVIDIA ')} {errors[factor][row]:+.1f}"
                                  for row in pre if row != choose))


if __name__ == "__main__":
    main()
