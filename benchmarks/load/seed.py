"""Seed cached predictions for the load test: POST a few workloads (analytic estimator, no GPU), run a burst worker
until they are done, check that the same POSTs now answer 200 from the cache, and write the key, the prediction ids
and the bodies to a JSON file for loadgen.py.

    python benchmarks/load/seed.py --url http://127.0.0.1:8000 --key "$KEY" --out seed.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

WORKLOADS = [
    {"model": "resnet18", "mode": "infer", "batch_size": 32, "resolution": 224, "precision": "amp-fp16"},
    {"model": "resnet50", "mode": "train", "batch_size": 64, "resolution": 224, "precision": "amp-fp16"},
    {"model": "mobilenetv3_large_100", "mode": "infer", "batch_size": 128, "resolution": 224, "precision": "fp32"},
    {"model": "efficientnet_b0", "mode": "train", "batch_size": 32, "resolution": 224, "precision": "amp-bf16"},
    {"model": "vit_base_patch16_224", "mode": "infer", "batch_size": 16, "resolution": 224, "precision": "amp-fp16"},
]
TARGETS = ["rtx-3090", "t4", "l4", {"name": "my laptop", "sm_count": 30, "boost_clock_mhz": 1700,
                                    "memory_bandwidth_gbps": 336, "memory_size_gb": 6}]


def bodies() -> list[dict[str, Any]]:
    return [{"workload": workload, "targets": TARGETS, "estimator": "analytic"} for workload in WORKLOADS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with httpx.Client(base_url=args.url, headers={"X-API-Key": args.key}, timeout=30) as client:
        for body in bodies():
            answer = client.post("/v1/predictions", json=body)
            answer.raise_for_status()
        # The API's environment (DATABASE_URL, REDIS_URL) is ours too: a worker that stops when the queue is empty.
        subprocess.run([sys.executable, "-m", "cli.main", "worker", "--burst", "--log-level", "warning"],
                       check=True)
        ids: list[str] = []
        for body in bodies():
            answer = client.post("/v1/predictions", json=body)
            data = answer.json()
            if answer.status_code != 200 or not data["cached"]:
                raise SystemExit(f"not cached after the worker ran: {answer.status_code} {answer.text[:300]}")
            ids += [item["id"] for item in data["data"]]
    args.out.write_text(json.dumps({"key": args.key, "ids": ids, "bodies": bodies()}, indent=1))
    sys.stdout.write(f"seeded {len(ids)} cached predictions from {len(bodies())} requests into {args.out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
