"""bench/fault_decompose.py's split of a fault count (issue 39) without a GPU: the four factors multiply back to the
entries, and a batch description leaves out the first and last batches."""
import json

import pytest
from conftest import bench_module

fd = bench_module("fault_decompose")


def test_the_four_factors_multiply_to_the_entries():
    # two VA blocks; block 0: granules 0 (pages 0, 1) and 1 (page 16); block 1: granule 32 (page 512)
    ents = [(1, 0, "u", 1), (1, 1, "u", 2), (2, 16, "v", 1), (2, 0, "u", 1), (3, 512, "u", 1)]
    d = fd.decompose(ents)
    assert d["entries"] == 5 and d["blocks"] == 2
    assert d["granules_per_block"] == 3 / 2 and d["pages_per_granule"] == 4 / 3 and d["entries_per_page"] == 5 / 4
    product = d["blocks"] * d["granules_per_block"] * d["pages_per_granule"] * d["entries_per_page"]
    assert abs(product - d["entries"]) < 1e-12


def test_a_batch_is_described_without_the_first_and_the_last():
    ents = [(0, 0, "u", 9), (1, 0, "u", 2), (1, 17, "v", 1), (2, 1, "u", 4), (3, 5, "w", 7)]
    b = fd.per_batch(ents)  # batches 1 and 2 only: (3 instances, 2 entries, 2 uTLBs, 2 pages, 2 granules), (4, 1, ...)
    assert b == {"instances": 3.5, "entries": 1.5, "utlbs": 1.5, "pages": 1.5, "granules": 1.5}


def test_the_default_mechanisms_are_the_validated_models(tmp_path, monkeypatch, capsys):
    f = tmp_path / "validated.json"
    f.write_text(json.dumps({"umsim": {"model_version": "umsim-7", "mechanisms": ["pages", "block-groups"]}}))
    monkeypatch.setattr(fd._commit, "validated_path", lambda: f)
    assert fd.chosen() == "pages,block-groups"
    f.write_text(json.dumps({"umsim": {"model_version": "umsim-6"}}))  # written before the entry named them
    assert fd.chosen() is None
    monkeypatch.setattr("sys.argv", ["fault_decompose.py", "--traces", str(tmp_path)])
    with pytest.raises(SystemExit) as e:
        fd.main()
    assert e.value.code == 2 and "give --features" in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", ["fault_decompose.py", "--features", "pages,blocks-groups"])
    with pytest.raises(SystemExit) as e:
        fd.main()
    assert e.value.code == 2 and "unknown mechanism blocks-groups" in capsys.readouterr().err
