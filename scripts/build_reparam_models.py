"""Build understudy/data/timm_reparam_models.txt: the registered models that timm.utils.reparameterize_model changes,
so the torch-free side knows whether a `reparam` workload differs from the model's training form.

reparameterize_model folds every module that has a `fuse`, `reparameterize` or `switch_to_deploy` method; a model
with none runs unchanged, and its reparam workload is the same workload as the plain one (understudy.workload).
Each model is built on PyTorch's meta device (no memory, no weights), as the worker builds it.

Run: .venv/bin/python scripts/build_reparam_models.py > understudy/data/timm_reparam_models.txt
"""

from __future__ import annotations

import sys

import timm
import torch

from understudy.workload import timm_model_names

FOLDING_METHODS = ("fuse", "reparameterize", "switch_to_deploy")


def foldable(name: str) -> bool:
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False)
    return any(callable(getattr(module, method, None)) for module in model.modules() for method in FOLDING_METHODS)


def main() -> int:
    for name in sorted(timm_model_names()):
        if foldable(name):
            print(name)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
