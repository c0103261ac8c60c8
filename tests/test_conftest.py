"""The guard of the GPU test run: UMSCOPE_REQUIRE_GPU=1 on a machine without a GPU must fail."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from umscope import native

TESTS = Path(__file__).resolve().parent

GPU_TEST = '''
import pytest

@pytest.mark.gpu
def test_needs_a_gpu():
    assert True
'''


def _pytest(tmp_path, require):
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (tmp_path / "test_tiny_gpu.py").write_text(GPU_TEST)
    env = {k: v for k, v in os.environ.items() if k != "UMSCOPE_REQUIRE_GPU"}
    if require:
        env["UMSCOPE_REQUIRE_GPU"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                           "-o", "markers=gpu: needs a GPU", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


@pytest.mark.skipif(bool(native.native_info().get("gpus")), reason="this machine has a GPU: the guard has nothing to catch")
def test_require_gpu_without_a_gpu_fails(tmp_path):
    res = _pytest(tmp_path, require=True)
    assert res.returncode != 0, res.stdout
    assert "1 error" in res.stdout and "UMSCOPE_REQUIRE_GPU is set" in res.stdout and "1 passed" not in res.stdout


@pytest.mark.skipif(bool(native.native_info().get("gpus")), reason="this machine has a GPU")
def test_without_require_gpu_the_gpu_test_skips(tmp_path):
    res = _pytest(tmp_path, require=False)
    assert res.returncode == 0, res.stdout
    assert "1 skipped" in res.stdout
