"""The API imports no GPU code; its estimator table agrees with the worker's estimators."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_app_imports_neither_torch_nor_the_engine_nor_the_worker():
    code = ("import json, sys; import app.main; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'timm', 'worker', 'engine'})))")

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert json.loads(done.stdout) == []


def test_the_apis_estimator_table_matches_the_worker_estimators(settings):
    from understudy.estimator_info import ESTIMATORS, estimator_version
    from engine.estimators import ESTIMATORS as WORKER_ESTIMATORS
    from engine.estimators import get_estimator

    fix = "; update the table in understudy/estimator_info.py to match engine/estimators"
    assert set(ESTIMATORS) == set(WORKER_ESTIMATORS), fix
    for name, cls in WORKER_ESTIMATORS.items():
        assert ESTIMATORS[name].needs_gpu == cls.needs_gpu, name + fix
        assert estimator_version(name, settings) == get_estimator(name).version, name + fix


def test_the_spec_estimators_version_follows_the_settings_like_the_worker(settings):
    from understudy.estimator_info import estimator_version
    from engine.estimators.spec import SpecEstimator

    for update in ({"sm_mechanism": "mps"}, {"allow_clock_lock": True}):
        changed = settings.model_copy(update=update)
        assert estimator_version("spec", changed) == SpecEstimator(changed).version
