"""No source file over 800 lines (issue 36). Every file git tracks (or would add: untracked files not ignored) under
the source folders counts, whatever its language; documents (docs/), measured data (data/) and generated
JSON / JSON lines are not sources. A file that grows past the limit is split by concern (as
native/profiler/counters.cpp was into counters_range.cpp, counters_sampling.cpp and counters_internal.hpp)."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 800
SOURCE_FOLDERS = ("native", "python", "bench", "tests", "cmake", ".ci", "contrib")
ROOT_FILES = ("CMakeLists.txt", "Makefile", "pyproject.toml")
NOT_SOURCES = (".json", ".jsonl")


def line_count(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def too_long(paths, root: Path, limit: int = LIMIT) -> list:
    """'path: N lines' for each file of `paths` (relative to `root`) over `limit` lines, longest first."""
    counts = [(line_count(root / p), p) for p in paths if (root / p).is_file()]
    return [f"{p}: {n} lines" for n, p in sorted(counts, key=lambda c: (-c[0], c[1])) if n > limit]


def source_files() -> list:
    if not shutil.which("git"):
        pytest.skip("git is not installed: the source files are the ones git tracks")
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "--",
                        *SOURCE_FOLDERS, *ROOT_FILES], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"not a git checkout ({r.stderr.strip()}): the source files are the ones git tracks")
    return sorted({p for p in r.stdout.splitlines() if not p.endswith(NOT_SOURCES)})


def test_no_source_file_over_the_limit():
    files = source_files()
    assert any(f.startswith("native/") for f in files) and any(f.startswith("python/") for f in files), files[:5]
    offenders = too_long(files, ROOT)
    assert not offenders, f"over {LIMIT} lines (split by concern): " + "; ".join(offenders)


def test_the_check_names_each_offender_and_its_count(tmp_path):
    (tmp_path / "a.cpp").write_text("x\n" * (LIMIT + 1))
    (tmp_path / "b.py").write_text("x\n" * LIMIT)
    (tmp_path / "c.hpp").write_text("x\n" * (LIMIT + 5) + "no newline at the end")
    assert too_long(["a.cpp", "b.py", "c.hpp", "gone.cpp"], tmp_path) == ["c.hpp: 806 lines", "a.cpp: 801 lines"]
