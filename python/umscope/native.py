"""The one narrow interface to the native runner umbench: a case's argument
list in, JSON-lines records out."""

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

from umscope.errors import UsageError


def find_binary(name, env_var, missing, beside=None) -> str:
    """A native program: $env_var, else the package's bin/ (or, with `beside`, that program's folder), else PATH;
    else a UsageError saying `missing`."""
    env = os.environ.get(env_var)
    if env:
        return env
    for folder in [Path(beside).parent] if beside else [Path(__file__).parent / "bin"]:
        if (folder / name).exists():
            return str(folder / name)
    found = shutil.which(name)
    if found:
        return found
    raise UsageError(missing)


def umbench_path() -> str:
    """$UMSCOPE_UMBENCH, the binary installed in the package, or one on PATH."""
    return find_binary("umbench", "UMSCOPE_UMBENCH", "the native runner umbench is missing: install the package "
                       "with pip (it builds umbench) or set UMSCOPE_UMBENCH")


def umbench_mpi_path() -> str:
    """umbench-mpi, the runner as one MPI rank: $UMSCOPE_UMBENCH_MPI, beside umbench, or on PATH."""
    return find_binary("umbench-mpi", "UMSCOPE_UMBENCH_MPI", "umbench-mpi was not built: no MPI was found when "
                       "umscope was installed (install an MPI with its compiler wrappers, e.g. Debian's "
                       "libopenmpi-dev, and reinstall)", beside=umbench_path())


def _json_lines(text: str) -> list:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


@functools.lru_cache(maxsize=None)
def native_info() -> dict:
    """umbench info: what the CUDA runtime sees (cached per process)."""
    res = subprocess.run([umbench_path(), "info"], capture_output=True, text=True, timeout=120)
    objs = _json_lines(res.stdout)
    if res.returncode != 0 or not objs:
        return {"built_with_cuda": False, "gpus": [],
                "why_no_gpu": f"umbench info failed (exit {res.returncode}): {res.stderr.strip()[:300]}"}
    return objs[0]


def parse_output(stdout: str):
    """Splits umbench output into (records, status line or None)."""
    records, status = [], None
    for obj in _json_lines(stdout):
        if obj.get("type") == "record":
            records.append(obj)
        elif obj.get("type") == "status":
            status = obj
    return records, status


def run_case(benchmark: str, *args, timeout=1800):
    """Runs one umbench case directly (for scripts): (records, status). A run that printed no
    status line (killed, crashed) gets a 'failed' status with the end of its stderr."""
    res = subprocess.run([umbench_path(), "run", benchmark, *[str(a) for a in args]], capture_output=True,
                         text=True, timeout=timeout)
    records, status = parse_output(res.stdout)
    return records, status or {"type": "status", "status": "failed", "reason": res.stderr[-300:]}


def _loaded_path(lib: str, basename_part: str):
    """Loads `lib` with ctypes and returns the path the loader resolved it to (or None)."""
    import ctypes
    try:
        ctypes.CDLL(lib, mode=os.RTLD_LOCAL)
    except OSError:
        return None
    with open("/proc/self/maps", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and basename_part in os.path.basename(parts[-1]):
                return parts[-1]
    return None


def cublas_path():
    """The libcublas that umbench's gemm would dlopen, in its order: $UMSCOPE_CUBLAS, NVIDIA's wheel
    beside the package (site-packages/nvidia/cu13/lib), the loader's search, $CUDA_HOME, /usr/local/cuda."""
    names = [os.environ.get("UMSCOPE_CUBLAS") or None,
             str(Path(__file__).resolve().parent.parent / "nvidia" / "cu13" / "lib" / "libcublas.so.13"),
             "libcublas.so.13", "libcublas.so.12", "libcublas.so"]
    if os.environ.get("CUDA_HOME"):
        names.append(os.path.join(os.environ["CUDA_HOME"], "lib64", "libcublas.so"))
    names.append("/usr/local/cuda/lib64/libcublas.so")
    for nm in filter(None, names):
        if "/" in nm and not os.path.exists(nm):
            continue
        found = _loaded_path(nm, "libcublas.so")
        if found:
            return found
    return None


def kind_name(spec: str) -> str:
    """A kind spec's base name: 'pinned' of 'pinned,first_touch=gpu', 'numa' of 'numa:1'."""
    return (spec or "").partition(",")[0].partition(":")[0]


def validate_kind(spec: str) -> str:
    """Checks a kind spec with umbench's own parser; returns it unchanged."""
    res = subprocess.run([umbench_path(), "check-kind", spec], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise UsageError(res.stderr.strip() or f"bad memory kind {spec!r}")
    return spec
