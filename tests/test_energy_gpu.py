"""The energy of a case on a real GPU (issue 40): NVML's counter gives a gpu-stream case of one to a few seconds
a positive energy, and its average power lies within (0, the GPU's power limit]. Skipped without a GPU.
About 10 s."""
import json

import pytest

from conftest import run_cli

pytestmark = pytest.mark.gpu


def test_a_stream_case_reports_its_gpu_energy_within_the_power_limit(store_path):
    # 1 GiB arrays, 200 repetitions of each operation: about 1-3 s of case on an H100 (checks included).
    res = run_cli("bench", "gpu-stream", "--kind", "device", "--size", "1G", "--reps", "200", "--store", store_path,
                  "--json", "--no-progress")
    assert res.returncode == 0, res.stderr[-2000:]
    recs = json.loads(res.stdout)
    en = recs[0]["extra"]["energy"]
    assert all(r["extra"]["energy"] == en for r in recs)  # one case, one window
    assert en["wall_s"] >= 0.5 and "note" not in en, en
    gpu = en["sources"][f"gpu{en['gpus'][0]}"]
    assert gpu["used"] and "nvmlDeviceGetTotalEnergyConsumption" in gpu["name"]
    assert gpu["joules"] > 0, gpu
    assert gpu["power_limit_w"] and 0 < gpu["watts"] <= gpu["power_limit_w"], gpu
    assert en["gpu_watts"] == pytest.approx(gpu["watts"])
    # Every other source is a figure or absent with its reason, never a silent 0.
    for key, s in en["sources"].items():
        assert (s["joules"] is not None) or s.get("reason"), (key, s)
