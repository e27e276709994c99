"""Replay an Understudy trace in FLGo: a Simulator that sets, round by round, who is available, who drops out, each
client's latency and the server's tolerance for latency from a `format=flgo` trace.

FLGo's horizontal scene wraps the server's sampling, communication and the clients' latency with its simulator
(flgo.simulator.base: with_availability, with_dropout, with_latency, with_clock); this Simulator answers those hooks
from the trace instead of FLGo's own random draws. Sample with `'sample': 'full'`: the round's participants are the
trace's (the others are offline for the round), and the synchronous round closes at the trace's closing time, which
FLGo reaches as its tolerance for latency whenever a participant dropped out or finished after it.

    import flgo, flgo.algorithm.fedavg as fedavg
    from flgo_trace_simulator import trace_simulator     # this file, on sys.path
    runner = flgo.init(task, fedavg, option={"sample": "full", "num_rounds": 10},
                       Simulator=trace_simulator("population.flgo.json"))
    runner.run()                                          # runner.gv.clock.current_time: virtual milliseconds

Needs `pip install flgo` (0.4.4); the trace's clients are FLGo's client ids 0..N-1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flgo.simulator.base import BasicSimulator


def trace_simulator(path: str | Path) -> type[BasicSimulator]:
    """An FLGo Simulator class that replays the trace at `path` (rounds past its end replay its last round)."""
    trace = json.loads(Path(path).read_text())
    if trace.get("format") != "flgo":
        raise ValueError(f"{path} is not an FLGo trace (GET /v1/populations/{{id}}/trace?format=flgo)")
    rounds: list[dict[str, Any]] = trace["rounds"]

    class TraceSimulator(BasicSimulator):
        def _round(self) -> dict[str, Any]:
            return rounds[min(max(self.server.current_round, 1), len(rounds)) - 1]

        def update_client_availability(self) -> None:
            this = self._round()
            online = set(this["available"])
            self.set_variable(self.all_clients, "prob_available", [float(c in online) for c in self.all_clients])
            self.set_variable(self.all_clients, "prob_unavailable", [float(c not in online) for c in self.all_clients])
            self.server.set_tolerance_for_latency(this["tolerance_for_latency"])

        def update_client_connectivity(self, client_ids: list[int], *args: Any, **kwargs: Any) -> None:
            dropped = set(self._round()["dropped"])
            self.set_variable(client_ids, "prob_drop", [float(c in dropped) for c in client_ids])

        def update_client_responsiveness(self, client_ids: list[int], *args: Any, **kwargs: Any) -> None:
            latency = self._round()["latency"]
            self.set_variable(client_ids, "latency", [latency[c] for c in client_ids])

    return TraceSimulator
