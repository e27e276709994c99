"""A PostgreSQL cluster and a Redis server of the fault tests' own: made in a temporary folder, on free loopback
ports, and removed afterwards. The fault tests stop and restart these, never the machine's shared servers.

PostgreSQL refuses to run as root, so as root the cluster's commands run as the `postgres` user (runuser), which
owns the folder. The cluster's superuser is named after the user that runs the tests, with trust authentication on
loopback only.
"""

from __future__ import annotations

import getpass
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.waiting import wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _postgres_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (apt-get install postgresql)")
    return found


@dataclass
class PrivatePostgres:
    folder: Path
    port: int
    user: str

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/faults"

    def _run(self, *command: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=120)

    def create(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        made = self._run(_postgres_bin("initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust",
                         "--no-sync", "-E", "UTF8")
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed: {made.stderr}")
        self.start()
        created = subprocess.run([_postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
                                  self.user, "faults"], capture_output=True, text=True, timeout=60)
        if created.returncode != 0:
            raise RuntimeError(f"createdb failed: {created.stderr}")

    def answers(self) -> bool:
        return subprocess.run([_postgres_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"],
                              timeout=10).returncode == 0

    def start(self) -> None:
        if self.answers():
            return
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        started = self._run(_postgres_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"), "-o",
                            options, "-w", "start")
        if started.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {started.stderr}{started.stdout}")
        wait_for(self.answers, 60, "the private PostgreSQL to answer")

    def stop(self) -> None:
        self._run(_postgres_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        wait_for(lambda: not self.answers(), 30, "the private PostgreSQL to stop")


@dataclass
class PrivateRedis:
    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/15"

    def _cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), *args], capture_output=True,
                              text=True, timeout=10)

    def answers(self) -> bool:
        return self._cli("ping").stdout.strip() == "PONG"

    def start(self) -> None:
        if not self.answers():
            subprocess.run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", str(self.port),
                            "--save", "", "--appendonly", "no", "--dir", str(self.folder),
                            "--logfile", str(self.folder / "redis.log")], capture_output=True, timeout=30)
        wait_for(self.answers, 30, "the private Redis to answer")

    def stop(self) -> None:
        """Shut down without saving: everything in it is lost, as in a crash."""
        self._cli("shutdown", "nosave")
        wait_for(lambda: not self.answers(), 10, "the private Redis to stop")


@dataclass
class PrivateStores:
    postgres: PrivatePostgres
    redis: PrivateRedis
    folder: Path

    @classmethod
    def create(cls) -> PrivateStores:
        folder = Path(tempfile.mkdtemp(prefix="understudy-faults-"))
        os.chmod(folder, 0o755)
        (folder / "pg").mkdir()
        (folder / "redis").mkdir()
        stores = cls(PrivatePostgres(folder / "pg", free_port(), getpass.getuser()),
                     PrivateRedis(folder / "redis", free_port()), folder)
        try:
            stores.postgres.create()
            stores.redis.start()
        except BaseException:
            stores.remove()
            raise
        return stores

    def remove(self) -> None:
        if self.redis.answers():
            self.redis.stop()
        if (self.postgres.data / "postmaster.pid").exists():
            self.postgres.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
