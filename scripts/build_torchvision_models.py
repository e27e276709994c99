"""Build understudy/data/torchvision_models.txt and understudy/data/torchvision_params.csv: torchvision's classification
models that timm's registry lacks (FedScale's shufflenet_v2_x2_0 among them), so the torch-free side validates their
names and knows the size of their FL update.

A model is listed when it builds on PyTorch's meta device as the worker builds it (engine.workloads.build_model) and
one training step of it counts there (engine.counting). Its parameter count is taken with 1000 and with 10 classes:
the head grows linearly with the classes (understudy/param_counts.py); torchvision's models take 3 input channels
only, so the per-channel slope is left empty.

Run: .venv/bin/python scripts/build_torchvision_models.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import torchvision

from engine.counting import count_workload
from engine.workloads import build_model
from understudy.workload import Workload, timm_model_names, torchvision_model_names

DATA = Path(__file__).resolve().parents[1] / "understudy" / "data"


def params(name: str, num_classes: int) -> int:
    workload = Workload.model_construct(model=name, num_classes=num_classes, in_chans=3, precision="fp32",
                                        memory_format="nchw", reparam=False, torch_major=2, mode="train")
    return sum(p.numel() for p in build_model(workload, "meta").parameters())


def main() -> int:
    timm = timm_model_names()
    candidates = [name for name in sorted(torchvision.models.list_models(module=torchvision.models))
                  if name not in timm]
    # Listed first, so that the worker's build takes them from torchvision; listed again below as they passed.
    (DATA / "torchvision_models.txt").write_text("".join(f"{name}\n" for name in candidates))
    torchvision_model_names.cache_clear()
    names, rows = [], []
    for name in candidates:
        try:
            base = params(name, 1000)
            count_workload(Workload.model_construct(
                model=name, mode="train", batch_size=2, resolution=(224, 224), in_chans=3, num_classes=1000,
                precision="fp32", memory_format="nchw", optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=1e-4,
                torch_major=2, reparam=False))
        except Exception as exc:  # noqa: BLE001 - a model that cannot be built or counted is left out, said why
            sys.stderr.write(f"{name}: left out ({exc})\n")
            continue
        names.append(name)
        rows.append([name, base, (base - params(name, 10)) / 990, ""])
    (DATA / "torchvision_models.txt").write_text("".join(f"{name}\n" for name in names))
    with (DATA / "torchvision_params.csv").open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["model", "params", "per_class", "per_in_chan"])
        writer.writerows(rows)
    sys.stderr.write(f"{len(names)} torchvision models\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
