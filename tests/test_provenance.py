"""umscope's version and commit come from the package as built (umscope/_version.py, written by
cmake/Provenance.cmake), never from the git repository around the current directory."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from umscope import provenance

ROOT = Path(__file__).resolve().parent.parent


def _git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def foreign_repo(tmp_path):
    """Another project's git repository with umscope's tree unpacked inside it (no .git of its own)."""
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    repo = tmp_path / "other-project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "README").write_text("not umscope\n")
    _git(repo, "add", "README")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "other")
    tree = repo / "vendor" / "umscope"
    for d in ("bench", "python", "cmake"):
        shutil.copytree(ROOT / d, tree / d, ignore=shutil.ignore_patterns("__pycache__", "bin", "lib"))
    shutil.copy(ROOT / "CMakeLists.txt", tree / "CMakeLists.txt")
    return repo, tree, _git(repo, "rev-parse", "--short", "HEAD")


def test_bench_documents_never_take_the_surrounding_repositorys_commit(foreign_repo):
    repo, tree, other = foreign_repo
    code = ("import sys; sys.path[:0] = [sys.argv[1] + '/bench', sys.argv[1] + '/python']; import _commit; "
            "print(_commit.commit(sys.argv[1]))")
    env = {k: v for k, v in os.environ.items() if k not in ("UMSCOPE_COMMIT", "PYTHONPATH")}
    out = subprocess.run([sys.executable, "-c", code, str(tree)], cwd=tree, env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert other not in out and out == provenance.NOT_BUILT
    env["UMSCOPE_COMMIT"] = "feed123"
    out = subprocess.run([sys.executable, "-c", code, str(tree)], cwd=tree, env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "feed123"


def test_the_build_writes_the_commit_only_of_its_own_repository(foreign_repo, tmp_path):
    """cmake/Provenance.cmake on the unpacked tree: 'unknown', not the other project's commit."""
    if not shutil.which("cmake"):
        pytest.skip("cmake is not installed")
    repo, tree, other = foreign_repo
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p NONE)\n"
        f"set(CMAKE_SOURCE_DIR \"{tree}\")\ninclude(\"{tree}/cmake/Provenance.cmake\")\n")
    env = {k: v for k, v in os.environ.items() if k != "UMSCOPE_COMMIT"}
    build = tmp_path / "b"
    subprocess.run(["cmake", "-S", str(probe), "-B", str(build)], env=env, capture_output=True, text=True, check=True)
    text = (build / "_version.py").read_text()
    assert 'commit = "unknown"' in text and other not in text
    # In umscope's own repository (this checkout, when it is one): its HEAD.
    if (ROOT / ".git").exists():
        (probe / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.18)\nproject(p NONE)\n"
            f"set(CMAKE_SOURCE_DIR \"{ROOT}\")\ninclude(\"{ROOT}/cmake/Provenance.cmake\")\n")
        build2 = tmp_path / "b2"
        subprocess.run(["cmake", "-S", str(probe), "-B", str(build2)], env=env, capture_output=True, text=True,
                       check=True)
        assert f'commit = "{_git(ROOT, "rev-parse", "--short", "HEAD")}' in (build2 / "_version.py").read_text()


def test_runs_record_the_built_commit(monkeypatch):
    """A built package's commit is what runs record, whatever $UMSCOPE_COMMIT says at run time (the variable
    names the commit at build time, and at run time only for a package that does not know its own)."""
    import types
    monkeypatch.setenv("UMSCOPE_COMMIT", "cafe42")
    monkeypatch.setattr(provenance, "_version", types.SimpleNamespace(version="0.1.0", commit="abc1234", built="t"))
    assert provenance.commit() == "abc1234" and provenance.info()["commit"] == "abc1234"
    from umscope import probe
    fp = probe.probe()
    assert fp["umscope_commit"] == "abc1234" and fp["umscope_version"] == provenance.version()
    for unknown in ("unknown", None):
        monkeypatch.setattr(provenance, "_version", types.SimpleNamespace(version="0.1.0", commit=unknown))
        assert provenance.commit() == "cafe42"
    monkeypatch.delenv("UMSCOPE_COMMIT")
    monkeypatch.setattr(provenance, "_version", types.SimpleNamespace(version="0.1.0", commit="unknown"))
    assert provenance.commit() == "unknown"
    monkeypatch.setattr(provenance, "_version", None)
    assert provenance.commit() == provenance.NOT_BUILT
