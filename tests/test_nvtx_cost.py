"""bench/nvtx_cost.py (issue 34) without a GPU: the bound it draws from profile's trace and the script's own timing,
the refusal where CUPTI did not record the script's own ranges, and bad arguments."""
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import bench_module

BENCH = Path(__file__).resolve().parent.parent / "bench"

nc = bench_module("nvtx_cost")

MINE = {"work": "llama", "unit": "ms/token", "units_run": 384, "median_ms": 8.0, "own_ranges": 20001,
        "per_call_us": 2.0}


def um_with(work_ranges, own=20001):
    ranges = [("cub::DeviceReduce", 1.0, 1.1)] * work_ranges + [("umscope-nvtx-cost", 2.0, 2.0)] * own
    return {"ranges": ranges, "instants": [("mark", 0.5)]}


def test_the_bound_is_calls_per_unit_times_the_call_over_the_unit():
    r = nc.combine(MINE, um_with(767))  # 767 ranges and one mark: 768 calls over 384 tokens, 2 a token
    assert r["work_calls"] == 768 and r["calls_per_unit"] == 2.0
    assert r["bound"] == pytest.approx(2 * 2.0e-3 / 8.0)  # 4 us of an 8 ms token: 0.05%
    assert r["names"] == {"cub::DeviceReduce": 767, "mark": 1}


def test_no_bound_where_cupti_missed_the_scripts_own_ranges_or_kept_no_trace():
    r = nc.combine(MINE, um_with(10, own=19000))
    assert r["bound"] is None and "19000 of this script's 20001" in r["why"]
    assert nc.combine(MINE, None)["bound"] is None


@pytest.mark.parametrize("args,text", [(["--work", "bert"], "unknown work bert"),
                                       (["--reps", "0"], "need at least 1"),
                                       (["--child", "--work", "llama,gpt2"], "--child runs one work")])
def test_bad_arguments_exit_2_with_one_line(args, text):
    res = subprocess.run([sys.executable, str(BENCH / "nvtx_cost.py"), *args], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and res.stderr.startswith("nvtx_cost: ") and not res.stdout
    assert text in res.stderr and len(res.stderr.strip().splitlines()) == 1
