"""A fault check on a real GPU (the H200 test host): the worker killed with SIGKILL in the middle of an MPS
measurement, then the next worker's start-up release (worker.main.release_leftovers) of what it left.

1. A "worker" process runs what a job runs for an MPS setting: Engine.predict, estimator `spec`, SM mechanism MPS,
   with UNDERSTUDY_MPS_DIR set to worker.main.mps_dir(settings, 0) as a worker sets it for its jobs, and enough
   timed windows that it is still measuring when it is killed. Its daemon is ours alone: its folders lie under a
   private UNDERSTUDY_RUN_DIR.
2. Once the MPS child times on the GPU, the worker gets SIGKILL. What is left is recorded: the control daemon (the
   pid file in its pipe folder), the MPS server, the measurement child (in a session of its own) and its parent.
3. release_leftovers(settings, 0, has_gpu=True), as the next worker calls it; then up to --wait-s for the daemon
   and the server to go, and a look at the folder and the child.
4. Whatever of ours is still there is then stopped, and the report says how: a measurement child that outlived the
   worker killed (the daemon may be waiting for its last client), then, as a last resort, the daemon and server by
   pid.
5. A fresh CUDA process must see every SM (--expect-sms) and run a matmul.

    source scripts/device_setup.sh && python3 benchmarks/faults/mps_kill.py --out $OUT

Writes mps_kill.json and mps_kill.md to --out. Exit status 0: release_leftovers alone stopped everything and the GPU
is whole again; 1: it did not (the report says what was left and what it took); 2: the setup never got to the kill.
Clocks are never locked and no GPU setting is changed; only the processes of the daemon started here are stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = {"model": "resnet50", "mode": "train", "precision": "fp32", "batch_size": 64, "resolution": 224}

FRESH_PROCESS = r"""
import json, time, torch
props = torch.cuda.get_device_properties(0)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn_like(a)
for _ in range(3):
    c = a @ b
torch.cuda.synchronize()
started, n = time.perf_counter(), 20
for _ in range(n):
    c = a @ b
torch.cuda.synchronize()
seconds = time.perf_counter() - started
ok = torch.allclose(a[:64].float() @ b[:, :64].float(), c[:64, :64].float(), rtol=1e-2, atol=1e-1)
print(json.dumps({"gpu": props.name, "sms": props.multi_processor_count, "matmul_ok": bool(ok),
                  "fp16_tflops": 2 * 8192**3 * n / seconds / 1e12}))
"""


def main() -> int:
    args = parse_args()
    if args.worker:
        return worker(args.target)
    own_run_dir = args.run_dir is None
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="understudy-mps-kill-"))
    # The settings the worker, its job and release_leftovers read: a private run dir, no clock lock, MPS.
    os.environ.update({"UNDERSTUDY_RUN_DIR": str(run_dir), "UNDERSTUDY_ALLOW_CLOCK_LOCK": "false",
                       "UNDERSTUDY_SM_MECHANISM": "mps", "UNDERSTUDY_TIMED_WINDOWS": str(args.windows),
                       "UNDERSTUDY_WINDOW_MS": str(args.window_ms)})
    from understudy.settings import Settings
    from engine.restrict import ENV_MPS_DIR

    try:
        from worker.main import mps_dir
    except ImportError as exc:
        print(f"cannot import worker.main ({exc}): on the H200 test host its wheels come from "
              "scripts/fetch_device_wheels.sh (carry .whl) and `source scripts/device_setup.sh`", file=sys.stderr)
        return 2

    settings = Settings()
    folder = mps_dir(settings, 0)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "workload": WORKLOAD,
                              "target": args.target, "timed_windows": args.windows, "window_ms": args.window_ms,
                              "mps_dir": str(folder), "mps_processes_before": pgrep()}
    log = run_dir / "worker.log"
    with log.open("w") as sink:
        job = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", "--target", args.target],
                               env={**os.environ, ENV_MPS_DIR: str(folder)}, cwd=ROOT, stdout=sink, stderr=sink,
                               start_new_session=True)
    mine = Ours(folder)
    code = 2
    try:
        code = check(args, settings, job, mine, report)
    except Exception as exc:  # noqa: BLE001 - the report says what broke, and everything of ours is still stopped
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        report["cleanup"] = clean_up(job, mine)
        report["worker_log_tail"] = tail(log.read_text(errors="replace") if log.exists() else "", 15)
        report["exit_status"] = code
        write(report, args.out)
        if own_run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    print((args.out / "mps_kill.md").read_text())
    return code


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "faults" / "results")
    parser.add_argument("--target", default="rtx-3090", help="a catalog target the host runs under MPS")
    parser.add_argument("--windows", type=int, default=100, help="timed windows of the measurement (at most 100)")
    parser.add_argument("--window-ms", type=float, default=500.0, help="length of a timed window")
    parser.add_argument("--start-timeout-s", type=float, default=180.0,
                        help="how long the worker may take to get its MPS child onto the GPU")
    parser.add_argument("--settle-s", type=float, default=25.0,
                        help="after the MPS child starts, wait this long (torch imported, model built, timing "
                             "under way) before the kill")
    parser.add_argument("--wait-s", type=float, default=10.0, help="how long each step may take to stop things")
    parser.add_argument("--expect-sms", type=int, default=132, help="SMs a fresh process must see (the H200's)")
    parser.add_argument("--run-dir", help="UNDERSTUDY_RUN_DIR to use (default: a fresh private folder)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def worker(target: str) -> int:
    """The killed worker's job: one prediction whose measurement runs in an MPS child under our daemon."""
    from understudy.catalog import resolve_target
    from understudy.settings import get_settings
    from understudy.workload import Workload
    from engine.engine import Engine

    (result,) = Engine(get_settings()).predict(Workload(**WORKLOAD), [resolve_target(target)], "spec")
    print(result.model_dump_json())
    return 0


def check(args: argparse.Namespace, settings: Any, job: subprocess.Popen, mine: Ours,
          report: dict[str, Any]) -> int:
    from worker.main import release_leftovers

    # 1-2: the worker starts its daemon and MPS child; once the child is well into its measurement, the kill.
    deadline = time.monotonic() + args.start_timeout_s
    while not (mine.find() and mine.snapshot()["children"]):
        if job.poll() is not None:
            report["setup_error"] = f"the worker exited ({job.returncode}) before its MPS child started"
            return 2
        if time.monotonic() > deadline:
            missing = "MPS child" if mine.daemon_pid else "MPS daemon (or its pid)"
            report["setup_error"] = f"no {missing} after {args.start_timeout_s:.0f} s"
            return 2
        time.sleep(0.5)
    time.sleep(args.settle_s)
    if job.poll() is not None:
        report["setup_error"] = f"the worker finished ({job.returncode}) before the kill: raise --windows"
        return 2
    report["before_kill"] = mine.snapshot()
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    time.sleep(1.0)
    report["after_kill"] = {**mine.snapshot(), "pgrep": pgrep()}

    # 3: the next worker's start-up release.
    started = time.monotonic()
    released = release_leftovers(settings, 0, has_gpu=True)
    report["release"] = {"said": released, "took_s": round(time.monotonic() - started, 2)}
    gone, waited = mine.wait_gone(args.wait_s)
    report["after_release"] = {**mine.snapshot(), "daemon_and_server_gone": gone, "waited_s": waited,
                               "folder_removed": not mine.root_exists(), "pgrep": pgrep()}
    released_alone = gone and not mine.root_exists()

    # 4: whatever is still there, stopped by us, and what it took.
    if not gone:
        report["after_killing_child"] = {"killed": mine.kill_children()}
        gone, waited = mine.wait_gone(args.wait_s)
        report["after_killing_child"].update({**mine.snapshot(), "daemon_and_server_gone": gone,
                                              "waited_s": waited})
    if not gone:
        report["forced"] = mine.kill_daemon_and_server()
        gone, _ = mine.wait_gone(args.wait_s)
    report["all_gone"] = gone

    # 5: a fresh CUDA process, which must not be an MPS client of anything left.
    report["fresh_process"] = fresh_process()
    whole = report["fresh_process"].get("sms") == args.expect_sms and report["fresh_process"].get("matmul_ok")
    report["verdict"] = {"released_by_release_leftovers": released_alone, "gpu_whole_again": bool(whole)}
    return 0 if released_alone and whole else 1


def fresh_process() -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CUDA_MPS_")}
    try:
        fresh = subprocess.run([sys.executable, "-c", FRESH_PROCESS], env=env, capture_output=True, text=True,
                               timeout=180)
    except subprocess.TimeoutExpired:
        return {"error": "no answer in 180 s"}
    lines = [line for line in fresh.stdout.splitlines() if line.startswith("{")]
    if fresh.returncode != 0 or not lines:
        return {"error": f"exited {fresh.returncode}: {tail(fresh.stderr, 1)}"}
    return json.loads(lines[-1])


class Ours:
    """The processes of the MPS daemon the worker started in `folder` (none other's): found by their
    CUDA_MPS_PIPE_DIRECTORY, the daemon's pid file and the server's parent."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root: Path | None = None
        self.daemon_pid: int | None = None

    def find(self) -> bool:
        """Whether the worker's daemon runs yet; remembers its folder and pid (the folder goes with the release)."""
        roots = sorted(self.folder.glob("understudy-mps-*")) if self.folder.is_dir() else []
        if roots and self.daemon_pid is None:
            self.root = roots[0]
            pid_file = self.root / "pipe" / "nvidia-cuda-mps-control.pid"
            text = pid_file.read_text().strip() if pid_file.exists() else ""
            if text.isdigit():
                self.daemon_pid = int(text)
            elif daemons := self.snapshot()["daemons"]:
                self.daemon_pid = daemons[0]["pid"]
        return self.daemon_pid is not None

    def root_exists(self) -> bool:
        return self.root is not None and self.root.exists()

    def snapshot(self) -> dict[str, Any]:
        pipe = str(self.root / "pipe") if self.root else None
        found: dict[str, list[dict[str, Any]]] = {"daemons": [], "servers": [], "children": []}
        processes = [p for p in all_processes() if p["state"] not in ("Z", "X")]
        daemons = [p for p in processes if "nvidia-cuda-mps-control" in p["cmdline"]
                   and (p["pid"] == self.daemon_pid or (pipe and p["pipe"] == pipe))]
        found["daemons"] = daemons
        found["servers"] = [p for p in processes if "nvidia-cuda-mps-server" in p["cmdline"]
                            and (p["ppid"] in {d["pid"] for d in daemons} or (pipe and p["pipe"] == pipe))]
        found["children"] = [p for p in processes if "engine.mps_child" in p["cmdline"] and pipe
                             and p["pipe"] == pipe]
        return {**found, "pipe_folder": pipe, "pipe_folder_exists": bool(pipe and Path(pipe).exists())}

    def wait_gone(self, wait_s: float) -> tuple[bool, float]:
        started = time.monotonic()
        while True:
            now = self.snapshot()
            if not now["daemons"] and not now["servers"]:
                return True, round(time.monotonic() - started, 2)
            if time.monotonic() - started > wait_s:
                return False, round(time.monotonic() - started, 2)
            time.sleep(0.25)

    def kill_children(self) -> list[int]:
        """SIGKILL to each orphaned measurement child's process group (it leads one: run_mps_child's new session)."""
        killed = []
        for child in self.snapshot()["children"]:
            try:
                os.killpg(child["pid"], signal.SIGKILL)
                killed.append(child["pid"])
            except ProcessLookupError:
                pass
        return killed

    def kill_daemon_and_server(self) -> list[int]:
        now = self.snapshot()
        pids = [p["pid"] for p in now["servers"] + now["daemons"]]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(2.0)
        return pids


def clean_up(job: subprocess.Popen, mine: Ours) -> dict[str, Any]:
    """However the check ended: nothing of ours left running."""
    done: dict[str, Any] = {}
    if job.poll() is None:
        os.kill(job.pid, signal.SIGKILL)
        job.wait()
        done["worker"] = "killed"
    if mine.daemon_pid is None:
        mine.find()
    if children := mine.kill_children():
        done["children_killed"] = children
    if mine.root_exists():
        from engine.restrict import MpsDaemon

        daemon = MpsDaemon(os.environ.get("UNDERSTUDY_MPS_CONTROL", "nvidia-cuda-mps-control"), root=str(mine.root))
        daemon.running = True
        daemon.stop()
        done["daemon_quit"] = str(mine.root)
    if not mine.wait_gone(10.0)[0]:
        done["forced"] = mine.kill_daemon_and_server()
    return done


def all_processes() -> list[dict[str, Any]]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
            except PermissionError:
                environ = []
        except OSError:
            continue
        pipes = [e.split(b"=", 1)[1].decode(errors="replace") for e in environ
                 if e.startswith(b"CUDA_MPS_PIPE_DIRECTORY=")]
        found.append({"pid": int(proc.name), "state": stat[0], "ppid": int(stat[1]), "pgid": int(stat[2]),
                      "sid": int(stat[3]), "cmdline": cmdline[:160], "pipe": pipes[0] if pipes else None})
    return found


def pgrep() -> list[str]:
    """Every MPS process on the machine, ours or not, as `pgrep -af nvidia-cuda-mps` lists them."""
    listed = subprocess.run(["pgrep", "-af", "nvidia-cuda-mps"], capture_output=True, text=True)
    return [line for line in listed.stdout.splitlines() if "pgrep" not in line]


def write(report: dict[str, Any], out: Path) -> None:
    (out / "mps_kill.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "mps_kill.md").write_text(markdown(report))


def markdown(report: dict[str, Any]) -> str:
    verdict = report.get("verdict", {})
    lines = ["# A worker killed mid-MPS-measurement, and the next worker's release", "",
             f"{report['date']}, `{report['command']}`: {json.dumps(report['workload'])} on {report['target']}, "
             f"{report['timed_windows']} windows of {report['window_ms']} ms, daemon folder under "
             f"`{report['mps_dir']}`.", ""]
    if "setup_error" in report:
        lines += [f"**Setup failed:** {report['setup_error']}", ""]
    if "error" in report:
        lines += [f"**The check broke:** {report['error']}", ""]

    def pids(stage: dict[str, Any] | None, kind: str) -> str:
        if not stage:
            return "-"
        return ", ".join(f"{p['pid']} ({p['state']}, parent {p['ppid']}, session {p['sid']})"
                         for p in stage[kind]) or "none"

    lines += ["| stage | daemon | MPS server | measurement child | pipe folder |", "|---|---|---|---|---|"]
    for stage in ("before_kill", "after_kill", "after_release", "after_killing_child"):
        if stage in report:
            s = report[stage]
            lines.append(f"| {stage.replace('_', ' ')} | {pids(s, 'daemons')} | {pids(s, 'servers')} | "
                         f"{pids(s, 'children')} | {'there' if s.get('pipe_folder_exists') else 'gone'} |")
    release = report.get("release", {})
    after = report.get("after_release", {})
    lines += ["",
              f"- release_leftovers said {release.get('said')} in {release.get('took_s')} s; daemon and server gone "
              f"within {after.get('waited_s')} s: {after.get('daemon_and_server_gone')}; folder removed: "
              f"{after.get('folder_removed')}.",
              f"- After the release the measurement child was "
              f"{'still running' if after.get('children') else 'gone'}."]
    if "after_killing_child" in report:
        k = report["after_killing_child"]
        lines.append(f"- Killing the orphaned child ({k.get('killed')}) let the daemon and server go: "
                     f"{k.get('daemon_and_server_gone')} (within {k.get('waited_s')} s).")
    if "forced" in report:
        lines.append(f"- Last resort: the daemon and server killed by pid ({report['forced']}).")
    lines += [f"- Fresh CUDA process: {json.dumps(report.get('fresh_process'))}.",
              f"- Verdict: {json.dumps(verdict)}; exit status {report.get('exit_status')}.",
              f"- Cleanup at the end: {json.dumps(report.get('cleanup'))}.", "",
              "Worker log (tail):", "", "```", report.get("worker_log_tail", ""), "```"]
    return "\n".join(lines) + "\n"


def tail(text: str, lines: int) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
