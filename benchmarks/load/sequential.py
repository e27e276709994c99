"""One request at a time: what a cache hit costs the API when nothing queues. Over one keep-alive connection, a GET of
a seeded prediction and a cached POST in turn, each sent when the last has answered; prints the median and p90
latency per kind and, given the server's process ids, the CPU those processes spent per request (from /proc: the
API's own cost, with the client's and the database's left out).

    python benchmarks/load/sequential.py --url http://127.0.0.1:8077 --seed seed.json --pids 1234 --requests 2000

The load test (loadgen.py) asks how a rate is served; this asks why: a rise in CPU per request here is what made the
tail under load grow (benchmarks/load/REPORT.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from loadgen import Connection, cpu_s, encode


async def measure(url: str, seed: dict[str, object], requests: int, pids: list[int]) -> dict[str, object]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    key = str(seed["key"])
    gets = [encode("GET", f"/v1/predictions/{i}", host, key) for i in seed["ids"]]  # type: ignore[attr-defined]
    posts = [encode("POST", "/v1/predictions", host, key, body) for body in seed["bodies"]]  # type: ignore[attr-defined]
    reader, writer = await asyncio.open_connection(host, port)
    connection = Connection(reader, writer)
    for i in range(200):  # warm-up, not counted: pools fill, caches warm
        await connection.exchange(gets[i % len(gets)] if i % 2 == 0 else posts[i % len(posts)])
    latencies: dict[str, list[float]] = {"get": [], "post": []}
    cpu_before, wall_before = cpu_s(pids), time.perf_counter()
    for i in range(requests):
        kind = "get" if i % 2 == 0 else "post"
        request = gets[(i // 2) % len(gets)] if kind == "get" else posts[(i // 2) % len(posts)]
        start = time.perf_counter()
        status, _ = await connection.exchange(request)
        latencies[kind].append((time.perf_counter() - start) * 1000)
        if status != 200:
            raise SystemExit(f"{kind} answered {status}")
    wall = time.perf_counter() - wall_before
    server_cpu = cpu_s(pids) - cpu_before
    writer.close()
    return {
        "requests": requests,
        "wall_s": round(wall, 2),
        "server_cpu_ms_per_request": round(server_cpu / requests * 1000, 2) if pids else None,
        **{f"{kind}_{name}_ms": round(value, 2) for kind, values in latencies.items()
           for name, value in (("p50", statistics.median(values)),
                               ("p90", statistics.quantiles(values, n=10)[-1]))},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--seed", type=Path, required=True, help="the JSON file seed.py wrote (key, ids, bodies)")
    parser.add_argument("--requests", type=int, default=2000, help="requests measured (half GET, half POST)")
    parser.add_argument("--pids", type=int, nargs="*", default=[], help="the server's processes, for CPU per request")
    parser.add_argument("--out", type=Path, help="append the JSON result here")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.url, json.loads(args.seed.read_text()), args.requests, args.pids))
    line = json.dumps(result)
    sys.stdout.write(line + "\n")
    if args.out:
        with args.out.open("a") as out:
            out.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
