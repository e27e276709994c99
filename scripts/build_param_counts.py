"""Build understudy/data/timm_params.csv: every registered model's parameter count, so the torch-free side (the API,
the round model) knows the size of an FL update without building the model.

Each model is built three times on PyTorch's meta device (no memory, no weights), as the worker builds it
(timm.create_model with num_classes and in_chans): with 1000 classes and 3 channels, with 10 classes, and with 1
channel. The head grows linearly with the classes and the stem with the channels, and the two do not meet, so

    params(num_classes, in_chans) = params + per_class x (num_classes - 1000) + per_in_chan x (in_chans - 3)

(understudy/param_counts.py). A model that cannot be built with 1 channel gets an empty per_in_chan.

Run: .venv/bin/python scripts/build_param_counts.py > understudy/data/timm_params.csv
"""

from __future__ import annotations

import csv
import sys

import timm
import torch

from understudy.workload import timm_model_names


def count(name: str, num_classes: int = 1000, in_chans: int = 3) -> int:
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=in_chans)
    return sum(p.numel() for p in model.parameters())


def main() -> int:
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["model", "params", "per_class", "per_in_chan"])
    for name in sorted(timm_model_names()):
        base = count(name)
        per_class = (base - count(name, num_classes=10)) / 990
        try:
            per_in_chan: float | str = (base - count(name, in_chans=1)) / 2
        except Exception:  # noqa: BLE001 - any model that refuses one channel simply gets no per-channel figure
            per_in_chan = ""
        out.writerow([name, base, f"{per_class:g}", per_in_chan if per_in_chan == "" else f"{per_in_chan:g}"])
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
