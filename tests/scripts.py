"""Load a script of the repository (a benchmark, an example, a build script) as a module, for tests of its functions:
scripts are run by path, not installed, so they are not importable by name."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    """The module of the script at `relative` (to the repository's root), executed afresh on each call."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
