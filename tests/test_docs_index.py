"""Every document in docs/ is indexed in docs/README.md, and every script in bench/ in bench/README.md, so
that no document or script is linked from nowhere."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_document_is_indexed():
    index = (ROOT / "docs" / "README.md").read_text()
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "README.md" and p.name not in index]
    assert not missing, f"docs/README.md does not list: {missing}"


def test_every_data_file_of_docs_is_indexed():
    index = (ROOT / "docs" / "README.md").read_text()
    # raw-run files are indexed by their common stem
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.json*"))
               if p.name not in index and not p.name.startswith("model-validation-raw")]
    assert not missing, f"docs/README.md does not list: {missing}"


def test_every_bench_script_is_indexed():
    index = (ROOT / "bench" / "README.md").read_text()
    scripts = [p.name for p in sorted((ROOT / "bench").iterdir())
               if p.suffix in (".py", ".c", ".cu", ".sh") and p.name != "__init__.py"]
    missing = [s for s in scripts if f"`{s}`" not in index]
    assert not missing, f"bench/README.md does not list: {missing}"
