"""The models whose AMP step calls an op CUDA's autocast gives an fp32 output without a cast first
(engine.counting._fp32_output): softmax, log_softmax, sum, prod, norm and F.normalize on a 16-bit
tensor. A change to how the trace prices those touches only these models' counts (and every PyTorch 1.x step with
attention, traced unfused), so they are the ones `count_cache.py --recount` and the count table count again.

    python benchmarks/accuracy/autocast_models.py --processes 2 > benchmarks/accuracy/autocast-models.txt

Each model's inference and training step (amp-fp16, batch 2, its own input size) is traced on the meta device; a
model that calls none of them, or that cannot be built, prints nothing. About 17 minutes here for 1401 models.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import engine.counting as counting  # noqa: E402
from build_count_table import resolutions  # noqa: E402
from understudy.workload import Workload, timm_model_names, torchvision_model_names  # noqa: E402


def calls(model: str) -> set[str]:
    """The ops of _fp32_output that the model's AMP steps call on a 16-bit tensor."""
    seen: set[str] = set()
    original: Callable[..., Any] = counting._fp32_output

    def recording(func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        seen.add(name)
        return original(func, name, args, kwargs)

    counting._fp32_output = recording  # the autocast mode looks it up at each call
    try:
        for mode in ("infer", "train"):
            try:
                counting.count_workload(Workload(model=model, mode=mode, batch_size=2,
                                                 resolution=resolutions(model)[-1], precision="amp-fp16"))
            except Exception:  # noqa: BLE001 - a model this timm cannot build or trace has no counts to redo
                continue
    finally:
        counting._fp32_output = original
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    models = sorted(timm_model_names() | torchvision_model_names())
    with Pool(args.processes, maxtasksperchild=20) as pool:
        found = [model for model, ops in zip(models, pool.map(calls, models, chunksize=2), strict=True) if ops]
    print("\n".join(found))


if __name__ == "__main__":
    main()
