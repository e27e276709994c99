#!/usr/bin/env bash
# Install Understudy into .venv. timm needs torchvision, and PyPI's torchvision only loads beside the torch build
# it was made for, so the matching pair is installed first (on this project's machines pip finds both on local
# disk); the project's own range then installs nothing more for torch.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check "torch==2.14.1" "torchvision==0.29.1"
.venv/bin/pip install -q --disable-pip-version-check -e ".[test,lint]"
# Flower, for examples/fl_flower_deadline.py and its test. flwr pins fastapi, starlette, uvicorn and typer below the
# versions this project runs, for its own server processes (SuperLink, SuperNode); the example uses only its
# in-process strategy and server API, which runs with this project's versions. So flwr goes in without its pins,
# with the modules that API imports.
.venv/bin/pip install -q --disable-pip-version-check --no-deps "flwr==1.42.0" "protobuf>=5.28,<7" \
  "grpcio>=1.70,<2" "cryptography>=50,<51" "cffi>=1.17" "pycryptodome>=3.18,<4" "iterators==0.0.2"
