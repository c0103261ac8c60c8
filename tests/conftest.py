import os
import subprocess
import sys

import pytest

from umscope import native


_REQUIRED = pytest.StashKey[str]()


def _gpu_state():
    info = native.native_info()
    if info.get("gpus"):
        return True, ""
    return False, info.get("why_no_gpu") or "no GPU"


def pytest_collection_modifyitems(config, items):
    has_gpu, why = _gpu_state()
    if has_gpu:
        return
    if os.environ.get("UMSCOPE_REQUIRE_GPU"):
        # A GPU node that lost its GPU must not pass: every GPU test fails (not xfail, not skip).
        reason = f"UMSCOPE_REQUIRE_GPU is set but {why}"
        for item in items:
            if "gpu" in item.keywords:
                item.stash[_REQUIRED] = reason
        return
    skip = pytest.mark.skip(reason=f"GPU test: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    reason = item.stash.get(_REQUIRED, None)
    if reason:
        pytest.fail(reason, pytrace=False)


def run_cli(*args, env=None, timeout=600, **kw):
    """Runs the installed `umscope` entry point as a user would."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "umscope", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, **kw)


def umbench(*args, timeout=300):
    return subprocess.run([native.umbench_path(), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def store_path(tmp_path):
    return str(tmp_path / "store.sqlite")


def bench_module(name):
    """A script of bench/ imported as a module (bench/ on sys.path first: the scripts import their helpers)."""
    import importlib.util
    from pathlib import Path
    bench = Path(__file__).resolve().parent.parent / "bench"
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location(name, bench / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
