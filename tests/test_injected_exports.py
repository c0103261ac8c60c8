"""The libraries umscope loads into other people's programs export their C entry points and nothing else.

libumalloc runs inside PyTorch programs (`umscope place`), libumtrace and libumcounters inside any profiled
program (CUDA_INJECTION64_PATH). A C++ template instantiation or function-local static they export is bound to,
or merged with, the one another library of the program exports from its own libstdc++: on the H100, libumalloc's
std::regex (then in the size parser) crashed every `place --rule` run with SIGSEGV while PyTorch's libraries
were loaded. cmake/exports/NAME.map keeps the rest local."""
import shutil
import subprocess
from pathlib import Path

import pytest

import umscope

LIB = Path(umscope.__file__).parent / "lib"
API = {"libumalloc.so": None,  # every name starts with umscope_
       "libumtrace.so": {"InitializeInjection", "InitializeInjectionNvtx2", "umtrace_detach", "umtrace_attach"},
       "libumcounters.so": {"InitializeInjection"}}


def _exports(path):
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@pytest.mark.parametrize("name", sorted(API))
def test_an_injected_library_exports_only_its_c_entry_points(name):
    path = LIB / name
    if not path.is_file():
        pytest.skip(f"{name} is not built here (it needs the CUDA build{' and CUPTI' if name != 'libumalloc.so' else ''})")
    if shutil.which("nm") is None:
        pytest.skip("no nm (binutils) on this machine")
    names = _exports(path)
    assert names, f"{name} exports nothing"
    if API[name] is None:
        assert {n for n in names if not n.startswith("umscope_")} == set()
        assert {"umscope_alloc", "umscope_free", "umscope_place_configure"} <= names
    else:
        assert names == API[name]
