"""Table for benchmarks/engine_demo.sh: per model and target, the host time under each SM mechanism, its slowdown
against the unrestricted run, the slowdown the SM share implies, and how far MPS and green contexts agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(folder: Path, model: str, mechanism: str) -> dict[str, dict]:
    path = folder / f"{model}-{mechanism}.json"
    if not path.exists() or not path.read_text().strip():
        return {}
    return {p["target_id"]: p for p in json.loads(path.read_text())["predictions"]}


def raw_ms(prediction: dict) -> float | None:
    return prediction.get("details", {}).get("measurement", {}).get("min_ms")


def main(folder: Path) -> None:
    print("| model | target | mechanism | SMs given | host ms (raw) | slowdown vs all 132 SMs | 132 / SMs |"
          " predicted ms (spec) | MPS vs green context |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in ("resnet50", "vit_small_patch16_224"):
        runs = {mechanism: load(folder, model, mechanism) for mechanism in ("green-context", "mps")}
        for target in ("rtx-3060-12-gb", "rtx-3090", "rtx-4090"):
            predicted = {}
            for mechanism, predictions in runs.items():
                p = predictions.get(target)
                full = predictions.get("h200-sxm-141-gb")
                if not p or not full or raw_ms(p) is None or raw_ms(full) is None:
                    print(f"| {model} | {target} | {mechanism} | - | failed: {(p or {}).get('error')} | | | | |")
                    continue
                sms = p["host_setting"]["sm_count"] or 132
                predicted[mechanism] = p["latency_ms"]
                agreement = ""
                if len(predicted) == 2:
                    gc, mps = predicted["green-context"], predicted["mps"]
                    agreement = f"{(mps - gc) / gc * 100:+.1f}%"
                print(f"| {model} | {target} | {mechanism} | {sms} | {raw_ms(p):.2f} | "
                      f"{raw_ms(p) / raw_ms(full):.2f}x | {132 / sms:.2f}x | {p['latency_ms']:.2f} | {agreement} |")
        full = runs["green-context"].get("h200-sxm-141-gb")
        if full and raw_ms(full):
            print(f"| {model} | (H200, unrestricted) | none | 132 | {raw_ms(full):.2f} | 1.00x | 1.00x | "
                  f"{full['latency_ms']:.2f} | |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
