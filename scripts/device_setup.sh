#!/usr/bin/env bash
# On the H200 test host: install the carried wheels (scripts/fetch_device_wheels.sh) and this project, no registry.
# Use as: source scripts/device_setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
