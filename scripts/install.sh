#!/usr/bin/env bash
# Install Understudy into .venv with everything the command line, the worker and the tests need. timm needs
# torchvision, and PyPI's torchvision only loads beside the torch build it was made for, so the matching pair is
# installed first (on this project's machines pip finds both on local disk); the project's own range then installs
# nothing more for torch.
#
# Without an NVIDIA driver the CUDA libraries are dead weight (GBs): the pair's CPU build (+cpu) is installed instead
# where an index pip can reach offers it. Set UNDERSTUDY_TORCH_INDEX to such an index (PyTorch's CPU index is
# https://download.pytorch.org/whl/cpu); otherwise the configured indexes are asked, and without a CPU build there
# the default build is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH=2.14.1
TORCHVISION=0.29.1
# The timm the shipped count table (engine/data/count-table.zip) was made with: under another, every new workload's
# estimate waits for torch and a trace (scripts/build_count_table.py makes the table again).
TIMM=1.0.31
[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/pip install -q --disable-pip-version-check)

if [ ! -e /proc/driver/nvidia/version ] && ! command -v nvidia-smi >/dev/null; then
  index=()
  [ -n "${UNDERSTUDY_TORCH_INDEX:-}" ] && index=(--extra-index-url "$UNDERSTUDY_TORCH_INDEX")
  if "${pip[@]}" --retries 0 --timeout 20 "${index[@]}" "torch==${TORCH}+cpu" "torchvision==${TORCHVISION}+cpu" \
      2>/dev/null; then
    echo "no NVIDIA driver: installed torch ${TORCH}+cpu"
  fi
fi
"${pip[@]}" "torch==${TORCH}" "torchvision==${TORCHVISION}"
"${pip[@]}" "timm==${TIMM}"
"${pip[@]}" -e ".[worker,test,lint]"
# Flower, for examples/fl_flower_deadline.py and its test. flwr pins fastapi, starlette, uvicorn and typer below the
# versions this project runs, for its own server processes (SuperLink, SuperNode); the example uses only its
# in-process strategy and server API, which runs with this project's versions. So flwr goes in without its pins,
# with the modules that API imports.
"${pip[@]}" --no-deps "flwr==1.42.0" "protobuf>=5.28,<7" \
  "grpcio>=1.70,<2" "cryptography>=50,<51" "cffi>=1.17" "pycryptodome>=3.18,<4" "iterators==0.0.2"
# FLGo and APPFL, whose own code reads the FL traces in tests/rounds/test_frameworks.py (FedScale, in the test extra,
# needs nothing more). Both go in without their requirements: FLGo's would add the deprecated `pynvml` package, whose
# import hook makes torch warn on every CUDA import (nvidia-ml-py, already here, provides the module it imports);
# APPFL's pull in Ray, Globus, wandb, Opacus and protobuf 7 (which Flower's range excludes) for its distributed
# runtimes, while the virtual-time simulator the tests run (appfl.vsim) imports only colorama.
"${pip[@]}" --no-deps "flgo==0.4.4" "prettytable>=3" "wcwidth>=0.2" "ujson>=5" "toolz>=0.12" "tqdm>=4"
"${pip[@]}" --no-deps "appfl==1.12.0" "colorama>=0.4"
