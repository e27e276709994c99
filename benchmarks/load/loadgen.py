"""An open-loop HTTP load generator for the Understudy API: requests start on a fixed schedule (N per second), whether
or not earlier ones have answered, so a slow server shows up as latency instead of as a lower offered rate.

Each request is, in turn, a GET /v1/predictions/{id} of a seeded prediction or a POST /v1/predictions of a seeded
(cached) body; the seed file comes from seed.py. Latency runs from the moment the schedule said the request should
start to the end of its answer, so a generator that falls behind counts against the result, not in its favour.

The generator shares the machine with the server, so it is lean: plain HTTP/1.1 over a pool of keep-alive asyncio
connections (uvloop when installed), requests encoded once up front (0.15 to 0.2 ms of CPU per request, where an
httpx client spent about 4 ms).

    python benchmarks/load/loadgen.py --url http://127.0.0.1:8000 --seed seed.json --rate 200 --duration 60
    python benchmarks/load/loadgen.py ... --find-max --start 200 --step 100 --duration 20

Prints one JSON object per run (per rate with --find-max) and writes them to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from urllib.parse import urlsplit


@dataclass
class Run:
    offered_rps: float
    duration_s: float
    sent: int = 0
    completed: int = 0
    achieved_rps: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    errors: int = 0  # transport errors and answers other than the expected 200
    error_samples: list[str] = field(default_factory=list)
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)
    late_starts: int = 0  # requests the generator started more than 5 ms after their slot
    generator_cpu_s: float = 0.0
    server_cpu_ms_per_request: float | None = None  # the server's processes (--server-pids), over the measured part


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pids: list[int]) -> float:
    """User plus system CPU of these processes so far, in seconds (from /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / CLOCK_TICKS


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    index = min(len(sorted_values) - 1, max(0, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {"count": len(ordered), "p50_ms": round(percentile(ordered, 50), 2),
            "p95_ms": round(percentile(ordered, 95), 2), "p99_ms": round(percentile(ordered, 99), 2),
            "max_ms": round(ordered[-1], 2) if ordered else math.nan}


class Connection:
    """One keep-alive HTTP/1.1 connection: send a request's bytes, read one answer (Content-Length framed)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        body = await self.reader.readexactly(length) if length else b""
        return status, body


class Pool:
    def __init__(self, host: str, port: int, size: int) -> None:
        self.host, self.port, self.size = host, port, size
        self.idle: asyncio.Queue[Connection] = asyncio.Queue()

    async def open(self) -> None:
        # One at a time, a little apart, as independent clients would arrive: with `--workers N` each uvicorn process
        # gets a share of the connections instead of the first to wake up taking them all.
        for _ in range(self.size):
            reader, writer = await asyncio.open_connection(self.host, self.port)
            self.idle.put_nowait(Connection(reader, writer))
            await asyncio.sleep(0.02)

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        connection = await self.idle.get()  # waiting here counts as latency: the schedule does not wait
        try:
            answer = await connection.exchange(request)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            connection.writer.close()
            reader, writer = await asyncio.open_connection(self.host, self.port)
            self.idle.put_nowait(Connection(reader, writer))
            raise
        self.idle.put_nowait(connection)
        return answer

    def close(self) -> None:
        while not self.idle.empty():
            self.idle.get_nowait().writer.close()


def encode(method: str, path: str, host: str, key: str, body: dict[str, Any] | None = None) -> bytes:
    payload = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nX-API-Key: {key}\r\nAccept: application/json\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    return head.encode() + b"\r\n" + payload


async def run_once(url: str, key: str, seed: dict[str, Any], rate: float, duration_s: float,
                   connections: int, warmup_s: float = 0.0, server_pids: tuple[int, ...] = ()) -> Run:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    gets = [encode("GET", f"/v1/predictions/{i}", host, key) for i in seed["ids"]]
    posts = [encode("POST", "/v1/predictions", host, key, body) for body in seed["bodies"]]
    run = Run(offered_rps=rate, duration_s=duration_s)
    latencies: dict[str, list[float]] = {"get": [], "post": []}
    total = int(rate * duration_s)
    pool = Pool(host, port, connections)
    await pool.open()
    # Warm-up at the same rate, not counted: the server's pools fill and its caches warm as they would in service.
    warm_start = time.perf_counter()
    warming = []
    for i in range(int(rate * warmup_s)):
        delay = warm_start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        request = gets[i % len(gets)] if i % 2 == 0 else posts[i % len(posts)]
        warming.append(asyncio.create_task(pool.exchange(request)))
    await asyncio.gather(*warming, return_exceptions=True)
    cpu_start = time.process_time()
    server_cpu_start = cpu_s(list(server_pids))

    async def one(kind: str, request: bytes, due: float) -> None:
        try:
            status_code, body = await pool.exchange(request)
            status = str(status_code)
            # A cached POST answers 200 with every result; anything else (202: not cached) is an error here.
            ok = status_code == 200
            if ok and kind == "post" and b'"cached":true' not in body[:120]:
                ok, status = False, "200-not-cached"
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            status, ok = type(exc).__name__, False
        took_ms = (time.perf_counter() - due) * 1000
        run.statuses[f"{kind} {status}"] = run.statuses.get(f"{kind} {status}", 0) + 1
        run.completed += 1
        if ok:
            latencies[kind].append(took_ms)
        else:
            run.errors += 1
            if len(run.error_samples) < 5:
                run.error_samples.append(f"{kind} {status}")

    tasks = []
    start = time.perf_counter() + 0.05
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        elif -delay > 0.005:
            run.late_starts += 1
        kind = "get" if i % 2 == 0 else "post"
        request = gets[(i // 2) % len(gets)] if kind == "get" else posts[(i // 2) % len(posts)]
        tasks.append(asyncio.create_task(one(kind, request, due)))
        run.sent += 1
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    pool.close()
    run.generator_cpu_s = round(time.process_time() - cpu_start, 2)
    if server_pids and run.completed:
        run.server_cpu_ms_per_request = round((cpu_s(list(server_pids)) - server_cpu_start) / run.completed * 1000, 2)
    run.achieved_rps = round(run.completed / elapsed, 1)
    everything = latencies["get"] + latencies["post"]
    overall = summary(everything)
    run.p50_ms, run.p95_ms, run.p99_ms, run.max_ms = (overall["p50_ms"], overall["p95_ms"], overall["p99_ms"],
                                                      overall["max_ms"])
    run.by_kind = {kind: summary(values) for kind, values in latencies.items()}
    return run


def sustained(run: Run, p99_ms: float) -> bool:
    """No errors, p99 within the target, and the server kept up with the schedule."""
    return run.errors == 0 and run.p99_ms <= p99_ms and run.achieved_rps >= 0.98 * run.offered_rps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--seed", type=Path, required=True, help="the JSON file seed.py wrote (key, ids, bodies)")
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections in the pool")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds at the same rate before measuring")
    parser.add_argument("--find-max", action="store_true", help="raise the rate by --step until a run fails")
    parser.add_argument("--start", type=float, default=200.0)
    parser.add_argument("--step", type=float, default=100.0)
    parser.add_argument("--max-rate", type=float, default=5000.0)
    parser.add_argument("--p99-ms", type=float, default=25.0, help="the p99 a sustained rate must keep")
    parser.add_argument("--server-pids", type=int, nargs="*", default=[],
                        help="the server's processes (on this machine): report their CPU per request")
    parser.add_argument("--out", type=Path, help="append each run's JSON here")
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    seed = json.loads(args.seed.read_text())
    rates = [args.rate]
    if args.find_max:
        rates = [args.start + i * args.step for i in range(int((args.max_rate - args.start) / args.step) + 1)]
    best = None
    for rate in rates:
        run = asyncio.run(run_once(args.url, seed["key"], seed, rate, args.duration, args.connections, args.warmup,
                                 tuple(args.server_pids)))
        record = {**asdict(run), "sustained": sustained(run, args.p99_ms), "pid": os.getpid()}
        line = json.dumps(record)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if args.out:
            with args.out.open("a") as out:
                out.write(line + "\n")
        if not record["sustained"]:
            break
        best = rate
    if args.find_max:
        sys.stdout.write(json.dumps({"max_sustained_rps": best, "p99_target_ms": args.p99_ms}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
