"""Build understudy/data/gpus.csv from ../shared/reference/gpu_specs.csv plus per-precision tensor throughputs.

Tensor-core rates are not in the reference file. They are derived as SM count x boost clock x dense FLOP per clock
per SM for the architecture and product segment, from NVIDIA's architecture whitepapers (the headline figures they
print are reproduced by this product: RTX 3090 fp16/fp32-accumulate 71 TFLOPS, RTX 4090 165.2, A100 312, T4 65,
RTX 2080 Ti 53.8, L4 121, RTX 5090 209.5). GeForce parts run fp16/bf16 with fp32 accumulate, and TF32, at half the
rate of the workstation and data-center parts of the same architecture, and so do the parts in GEFORCE_RATE, whose
datasheets say so.

Held clocks come from each product's TDP, less what its DRAM draws, against its chip's other products
(understudy/power.py: dynamic power goes about as SMs x f^3 times the work per cycle). So a 150 W A10 holds about
1250 MHz where its GA102 siblings (RTX 3080 and 3090) hold their boost clock or near it, and about 990 MHz while its
tensor cores, twice as fast per cycle as a GeForce part's, run at full rate; a 300 W RTX 6000 Ada (its tensor
cores at the GeForce rate: GEFORCE_RATE) about 2075 MHz beside the RTX 4090's 2520. Nothing here is fitted to
measured latencies: only TDP, SM count, boost clock, memory technology and bandwidth, and the tensor rates, from the
specs.

Run: python scripts/build_catalog.py ../shared/reference/gpu_specs.csv scripts/catalog_additions.csv \
         > understudy/data/gpus.csv
(scripts/catalog_additions.csv holds rows the reference file lacks, with their public sources.)
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

# Run as a script from the checkout: the package beside it, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from understudy.power import HeldClocks, chip_references, held_clocks, product_budget

WHITEPAPERS = {
    "Pascal": "no tensor cores: fp16/bf16/tf32 fall back to the FP32 rate",
    "Volta": "NVIDIA Tesla V100 GPU Architecture whitepaper (2017): 8 tensor cores/SM, 1024 fp16 FLOP/clk/SM",
    "Turing": "NVIDIA Turing GPU Architecture whitepaper (2018), Table 1 and Appendix A: 1024 fp16 FLOP/clk/SM, "
    "GeForce fp32-accumulate at half rate; no bf16/tf32",
    "Ampere8.0": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 2048 fp16/bf16 and 1024 tf32 "
    "FLOP/clk/SM",
    "Ampere8.6": "NVIDIA Ampere GA102 GPU Architecture whitepaper (2020), Tables 1-3: 1024 fp16 FLOP/clk/SM dense, "
    "GeForce fp32-accumulate and tf32 at half rate",
    "Ada Lovelace": "NVIDIA Ada GPU Architecture whitepaper (2022), Table 1: 1024 fp16 FLOP/clk/SM dense, GeForce "
    "fp32-accumulate and tf32 at half rate",
    "Hopper": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 4096 fp16/bf16 and 2048 tf32 FLOP/clk/SM "
    "dense (the datasheet's 989 TFLOPS uses a lower sustained clock than the boost clock used here)",
    "Blackwell 2.0": "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025), Table 1: 1024 fp16 FLOP/clk/SM dense, "
    "GeForce fp32-accumulate and tf32 at half rate",
}


# Products that are not GeForce cards but run fp16 with fp32 accumulation, and TF32, at the GeForce rate, as their
# NVIDIA datasheet (or their data-center twin's) prints it.
GEFORCE_RATE = {
    # The L40 datasheet (2022): 181.05 dense fp16/bf16 and 90.5 TF32 TFLOPS for 142 AD102 SMs at 2490 MHz, 512 and
    # 256 FLOP per SM and cycle, the RTX 4090's rates; the L40S doubles them. The RTX 6000 Ada is the L40's
    # configuration (142 SMs, 48 GB GDDR6, 300 W), and its own datasheet prints only FP8 with fp16 accumulation
    # (1457 sparse TFLOPS: the RTX 4090's rate per SM and cycle too).
    "NVIDIA RTX 6000 Ada Generation": "the NVIDIA L40 datasheet (2022), its AD102 twin: fp32-accumulate and TF32 at "
    "the GeForce rate",
}


def rates(row: dict[str, str]) -> tuple[float, float, float, str]:
    """(fp16, bf16, tf32) dense FLOP per clock per SM, and the source that gives them."""
    arch, name, cc = row["architecture"], row["name"], row["compute_capability"]
    geforce = name.startswith("GeForce") or name in GEFORCE_RATE
    half = 0.5 if geforce else 1.0
    fp32_per_sm = float(row["fp32_tflops_boost"]) * 1e6 / (int(row["sm_count"]) * float(row["boost_clock_mhz"]))
    if arch == "Pascal":
        return fp32_per_sm, fp32_per_sm, fp32_per_sm, WHITEPAPERS["Pascal"]
    if arch == "Turing" and row["gpu_chip"] == "TU116":
        return 2 * fp32_per_sm, fp32_per_sm, fp32_per_sm, "TU116 has no tensor cores; fp16 runs at twice FP32 rate"
    if arch == "Volta":
        return 1024, fp32_per_sm, fp32_per_sm, WHITEPAPERS["Volta"]
    if arch == "Turing":
        return 1024 * half, fp32_per_sm, fp32_per_sm, WHITEPAPERS["Turing"]
    if arch == "Ampere" and cc == "8.0":
        return 2048, 2048, 1024, WHITEPAPERS["Ampere8.0"]
    if arch == "Ampere":
        return 1024 * half, 1024 * half, 512 * half, WHITEPAPERS["Ampere8.6"]
    if arch == "Hopper":
        return 4096, 4096, 2048, WHITEPAPERS["Hopper"]
    if arch in ("Ada Lovelace", "Blackwell 2.0"):
        return 1024 * half, 1024 * half, 512 * half, GEFORCE_RATE.get(name, WHITEPAPERS[arch])
    raise SystemExit(f"no tensor rates for architecture {arch!r} ({name})")


def slug(name: str) -> str:
    short = re.sub(r"^(GeForce|NVIDIA Tesla|NVIDIA)\s+", "", name)
    return re.sub(r"[^a-z0-9]+", "-", short.lower()).strip("-")


def tensor_rates(row: dict[str, str]) -> dict[str, float]:
    """A product's dense tensor FLOP per SM and cycle, by understudy.power.TENSOR_PRECISIONS."""
    fp16, bf16, tf32, _ = rates(row)
    return {"fp16": fp16, "bf16": bf16, "tf32": tf32}


def power_clocks(rows: list[dict[str, str]]) -> dict[str, HeldClocks]:
    """Each product's clocks under its power limit, by name (understudy/power.py)."""
    budgets = {row["name"]: product_budget(float(row["tdp_w"]), int(row["sm_count"]), float(row["boost_clock_mhz"]),
                                           row["memory_type"], float(row["memory_bandwidth_gbps"]))
               for row in rows}
    per_sm_cycle = {row["name"]: tensor_rates(row) for row in rows}
    reference = chip_references((row["gpu_chip"], budgets[row["name"]], per_sm_cycle[row["name"]], row["memory_type"])
                                for row in rows)
    return {row["name"]: held_clocks(float(row["boost_clock_mhz"]), budgets[row["name"]], reference[row["gpu_chip"]],
                                     per_sm_cycle[row["name"]])
            for row in rows}


def main(paths: list[str]) -> None:
    rows: list[dict[str, str]] = []
    for path in paths:
        with open(path, newline="") as file:
            rows.extend(csv.DictReader(file))
    extra = ["id", "fp16_tensor_tflops", "bf16_tensor_tflops", "tf32_tensor_tflops", "tensor_source",
             "sustained_clock_mhz", "fp16_tensor_clock_mhz", "bf16_tensor_clock_mhz", "tf32_tensor_clock_mhz"]
    clocks = power_clocks(rows)
    out = csv.DictWriter(sys.stdout, fieldnames=["id", *rows[0].keys(), *extra[1:]], lineterminator="\n")
    out.writeheader()
    for row in rows:
        fp16, bf16, tf32, source = rates(row)
        tflops_per_rate = int(row["sm_count"]) * float(row["boost_clock_mhz"]) / 1e6
        out.writerow(
            {
                "id": slug(row["name"]),
                **row,
                "fp16_tensor_tflops": round(fp16 * tflops_per_rate, 2),
                "bf16_tensor_tflops": round(bf16 * tflops_per_rate, 2),
                "tf32_tensor_tflops": round(tf32 * tflops_per_rate, 2),
                "tensor_source": source,
                "sustained_clock_mhz": clocks[row["name"]].sustained_mhz,
                **{f"{precision}_tensor_clock_mhz": mhz for precision, mhz in clocks[row["name"]].tensor_mhz.items()},
            }
        )


if __name__ == "__main__":
    main(sys.argv[1:])
