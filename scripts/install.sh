#!/usr/bin/env bash
# Install Understudy into .venv. timm needs torchvision, and PyPI's torchvision only loads beside the torch build
# it was made for, so the matching pair is installed first (on this project's machines pip finds both on local
# disk); the project's own range then installs nothing more for torch.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check "torch==2.14.1" "torchvision==0.29.1"
.venv/bin/pip install -q --disable-pip-version-check -e ".[test,lint]"
