#!/usr/bin/env bash
# Download here the cp312 wheels the H200 test host lacks (it has torch, timm, nvidia-ml-py, httpx, rich, typer but
# no registry). scripts/device_setup.sh installs them there. .whl/ is git-ignored and travels with `carry`.
# redis, rq and theirs are for importing worker.main there (benchmarks/faults/mps_kill.py calls release_leftovers).
# timm is the version the shipped count table was made with (engine/count_table.py: it is used only under that one).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .whl pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 \
  pydantic-settings==2.14.1 python-dotenv==1.2.2 sqlalchemy==2.0.44 greenlet==3.2.4 \
  redis==8.1.0 rq==3.0.0 croniter==7.0.0 python-dateutil==4.0.0 tzdata==2026.6 timm==1.0.31
ls .whl
