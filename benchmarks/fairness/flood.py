"""One key floods the service with heavy work; another key then asks for one cheap prediction. Measures how long the
cheap job waited in the queue (started_at - created_at) and in all (finished_at - created_at), and what happened to
the flood (how many were admitted, how many refused with 429).

    python benchmarks/fairness/flood.py --url http://127.0.0.1:8078 --flood-key "$A" --key "$B" --out result.json
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

HEAVY = {"model": "mvitv2_huge_cls", "mode": "train", "batch_size": 64, "precision": "amp-fp16"}
INLINE = [{"name": f"flood-{i}", "sm_count": 20 + i, "boost_clock_mhz": 1500, "memory_bandwidth_gbps": 300,
           "memory_size_gb": 8} for i in range(64)]
CHEAP = {"workload": {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"},
         "targets": ["rtx-3090"], "estimator": "analytic"}


def seconds(later: str, earlier: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--flood-key", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--flood", type=int, default=20, help="heavy requests from the flooding key")
    parser.add_argument("--pause-s", type=float, default=2.0, help="between the flood and the cheap request")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    flood: list[dict[str, Any]] = []
    with httpx.Client(base_url=args.url, timeout=60) as client:
        started = time.monotonic()
        for i in range(args.flood):
            body = {"workload": {**HEAVY, "batch_size": 1 + i}, "targets": INLINE, "estimator": "analytic"}
            answer = client.post("/v1/predictions", json=body, headers={"X-API-Key": args.flood_key})
            flood.append({"status": answer.status_code, "retry_after": answer.headers.get("Retry-After")})
        flood_s = time.monotonic() - started
        time.sleep(args.pause_s)
        created = client.post("/v1/predictions", json=CHEAP, headers={"X-API-Key": args.key})
        created.raise_for_status()
        prediction_id = created.json()["data"][0]["id"]
        deadline = time.monotonic() + args.timeout_s
        while True:
            row = client.get(f"/v1/predictions/{prediction_id}", headers={"X-API-Key": args.key}).json()
            if row["status"] in ("done", "failed", "oom") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        hosts = client.get("/v1/hosts", headers={"X-API-Key": args.key}).json()
    result = {
        "flood": {"requests": args.flood, "seconds": round(flood_s, 2),
                  "admitted": sum(item["status"] == 202 for item in flood),
                  "refused_429": sum(item["status"] == 429 for item in flood),
                  "statuses": [item["status"] for item in flood]},
        "cheap": {"status": row["status"], "error": row.get("error"),
                  "queue_wait_s": round(seconds(row["started_at"], row["created_at"]), 2) if row.get("started_at")
                  else None,
                  "total_s": round(seconds(row["finished_at"], row["created_at"]), 2) if row.get("finished_at")
                  else None},
        "workers": len(hosts["data"]),
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
