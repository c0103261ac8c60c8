"""The build's choice of CUDA compiler (cmake/FindNvcc.cmake), checked by configuring the project."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def _configure(build, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("CUDACXX", "UMSCOPE_PYPI_CUDA", "CMAKE_ARGS")}
    e.update(env)
    return subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DUMSCOPE_CUDA=ON", "-G", "Ninja"],
                          capture_output=True, text=True, env=e, timeout=600)


def _cached_compiler(build):
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith("CMAKE_CUDA_COMPILER:"):
            return line.split("=", 1)[1]
    return None


@pytest.mark.skipif(not NVCC or not shutil.which("cmake") or not shutil.which("ninja"), reason="needs nvcc, cmake, ninja")
def test_cudacxx_wins_over_the_compiler_cached_in_a_persisted_build_dir(tmp_path):
    build = tmp_path / "build"
    res = _configure(build, CUDACXX=NVCC)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert _cached_compiler(build) == NVCC
    # Another nvcc (a wrapper around the same one): the persisted build dir must switch to it.
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{NVCC}" "$@"\n')
    wrapper.chmod(0o755)
    res = _configure(build, CUDACXX=str(wrapper))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert _cached_compiler(build) == str(wrapper)
    assert "CUDA compiler changed" in res.stdout


@pytest.mark.skipif(not shutil.which("cmake"), reason="needs cmake")
def test_pypi_opt_in_without_the_wheels_fails_loudly(tmp_path):
    # The Python that CMake finds here has no nvidia-cuda-nvcc: the opt-in must not fall back.
    res = _configure(tmp_path / "b", UMSCOPE_PYPI_CUDA="1", CUDACXX=NVCC or "")
    assert res.returncode != 0
    assert "UMSCOPE_PYPI_CUDA=1 but the build's Python cannot import nvidia-cuda-nvcc" in res.stderr


@pytest.mark.skipif(not shutil.which("cmake"), reason="needs cmake")
def test_a_cudacxx_that_does_not_exist_is_an_error(tmp_path):
    res = _configure(tmp_path / "b", CUDACXX="/nonexistent/nvcc")
    assert res.returncode != 0 and "CUDACXX=/nonexistent/nvcc does not exist" in res.stderr
