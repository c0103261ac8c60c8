"""What Grace Hopper adds to the probe, read from a fake /sys and /proc tree (no Grace here): the base and
huge page sizes, kernel.numa_balancing and init_on_alloc, hwmon power sensors, the NVLink-C2C link (NVML,
faked) and the GH200 machine description filled from them. The fake tree's files and values are laid out
as a GH200 node with a 64k-page kernel exposes them (labels per Grace's ACPI power meters)."""

import types

import pytest

from umscope import nvml, plans, probe
from umscope.model import bounds
from umscope.report.machine import table


def _tree(root, files):
    for path, text in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")
    return root


GRACE = {
    "/proc/sys/kernel/numa_balancing": "1",
    "/proc/cmdline": "BOOT_IMAGE=/vmlinuz-6.8.0-1013-nvidia-64k root=/dev/nvme0n1p2 ro init_on_alloc=0 iommu.passthrough=1",
    "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size": "536870912",
    "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages": "0",
    "/sys/kernel/mm/hugepages/hugepages-524288kB/nr_hugepages": "0",
    "/sys/kernel/mm/hugepages/hugepages-16777216kB/nr_hugepages": "0",
    "/sys/class/hwmon/hwmon0/name": "nvme",
    "/sys/class/hwmon/hwmon0/temp1_input": "38850",
    "/sys/class/hwmon/hwmon1/device/power1_oem_info": "Module Power Socket 0",
    "/sys/class/hwmon/hwmon1/device/power1_average": "412500000",
    "/sys/class/hwmon/hwmon1/device/power1_average_interval": "50",
    "/sys/class/hwmon/hwmon2/device/power1_oem_info": "Grace Power Socket 0",
    "/sys/class/hwmon/hwmon2/device/power1_average": "98250000",
    "/sys/class/hwmon/hwmon3/device/power1_oem_info": "CPU Power Socket 0",
    "/sys/class/hwmon/hwmon3/device/power1_average": "61000000",
    "/sys/class/hwmon/hwmon4/device/power1_oem_info": "SysIO Power Socket 0",
    "/sys/class/hwmon/hwmon4/device/power1_average": "21000000",
}


def test_pages_and_kernel_settings_from_a_fake_tree(tmp_path):
    root = _tree(tmp_path, GRACE)
    pages = probe.page_sizes(root, base=65536)
    assert pages["base"] == 65536 and pages["thp_pmd"] == 512 << 20
    assert pages["hugetlb"] == [2 << 20, 512 << 20, 16 << 30]
    ks = probe.kernel_settings(root, release="6.8.0-1013-nvidia-64k")
    assert ks["numa_balancing"] == 1 and ks["numa_balancing_source"] == "/proc/sys/kernel/numa_balancing"
    assert ks["init_on_alloc"] is False and ks["init_on_alloc_source"] == "/proc/cmdline: init_on_alloc=0"
    # not on the command line: the kernel's build default, from its config
    _tree(root, {"/proc/cmdline": "root=/dev/sda1 ro",
                 "/boot/config-6.8.0-1013-nvidia-64k": "CONFIG_ARM64_64K_PAGES=y\nCONFIG_INIT_ON_ALLOC_DEFAULT_ON=y"})
    ks = probe.kernel_settings(root, release="6.8.0-1013-nvidia-64k")
    assert ks["init_on_alloc"] is True and "build default" in ks["init_on_alloc_source"]
    _tree(root, {"/boot/config-6.8.0-1013-nvidia-64k": "# CONFIG_INIT_ON_ALLOC_DEFAULT_ON is not set"})
    assert probe.kernel_settings(root, release="6.8.0-1013-nvidia-64k")["init_on_alloc"] is False
    # neither says: unknown, with the reason; an unreadable numa_balancing likewise
    empty = tmp_path / "empty"
    ks = probe.kernel_settings(empty, release="x")
    assert ks["init_on_alloc"] is None and "no /boot/config-x" in ks["init_on_alloc_source"]
    assert ks["numa_balancing"] is None and ks["numa_balancing_source"] == "not readable"


def test_hwmon_power_sensors_of_module_grace_and_rails(tmp_path):
    root = _tree(tmp_path, GRACE)
    sensors = probe.hwmon_power(root)
    assert [(s["what"], s["socket"], s["watts"]) for s in sensors] == [
        ("module", 0, 412.5), ("grace", 0, 98.25), ("cpu", 0, 61.0), ("sysio", 0, 21.0)]
    assert sensors[0]["sensor"] == "/sys/class/hwmon/hwmon1/device/power1" and sensors[0]["interval_ms"] == 50
    # a sensor on hwmonN itself, labelled the generic way, is read too; what it measures stays unknown
    _tree(root, {"/sys/class/hwmon/hwmon5/power1_label": "PSU0", "/sys/class/hwmon/hwmon5/power1_input": "5000000"})
    psu = probe.hwmon_power(root)[-1]
    assert (psu["label"], psu["what"], psu["watts"]) == ("PSU0", None, 5.0)
    assert probe.hwmon_power(tmp_path / "none") == []


class _FakeNvml:
    """pynvml's calls c2c() makes, answering as a GH200 would: 10 C2C links, each 44712 MB/s (values made
    up in the shape NVML gives them; this test checks the reading, not a machine)."""
    NVMLError = RuntimeError

    def __init__(self, active=10, links=10):
        self.active, self.links = active, links

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return "h"

    def nvmlDeviceGetC2cModeInfoV(self, h):
        return types.SimpleNamespace(isC2cEnabled=1)

    def nvmlDeviceGetFieldValues(self, h, ids):
        out = []
        for fid in ids:
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            val = {170: self.links, 171: int(scope < self.active), 172: 44712}[fid]
            out.append(types.SimpleNamespace(nvmlReturn=0, valueType=1, value=types.SimpleNamespace(uiVal=val)))
        return out


@pytest.fixture
def fake_nvml(monkeypatch):
    def use(fake):
        monkeypatch.setattr(nvml, "_init", lambda: (fake, ""))
        nvml._handle.cache_clear()
    yield use
    nvml._handle.cache_clear()


def test_c2c_link_and_its_bound_from_nvml(fake_nvml):
    fake_nvml(_FakeNvml())
    c = nvml.c2c("0009:01:00.0")
    assert c["enabled"] and c["links"] == 10 and c["active_links"] == 10 and c["gbps"] == 447.1
    fake_nvml(_FakeNvml(active=8))
    assert nvml.c2c("0009:01:00.0")["gbps"] == pytest.approx(357.7)
    fake_nvml(_FakeNvml(links=0))  # a GPU on PCIe: no C2C links
    assert nvml.c2c("0009:01:00.0") is None


def _gh200_fp(root, c2c=None, power=None):
    return {"host": {"page_size": 65536, "pages": probe.page_sizes(root, base=65536),
                     "kernel_settings": probe.kernel_settings(root, release="r")},
            "gpus": [{"device": 0, "name": "NVIDIA GH200 480GB", "addressing": "ATS", "link": {}, "c2c": c2c,
                      "pci_bus_id": "0009:01:00.0", "compute_capability": "9.0", "sms": 132,
                      "total_mem": 96 << 30, "l2_bytes": 50 << 20}],
            "power": power if power is not None else {"hwmon": probe.hwmon_power(root), "gpus": []}}


def test_gh200_description_is_filled_from_the_probe(tmp_path, fake_nvml):
    root = _tree(tmp_path, GRACE)
    fake_nvml(_FakeNvml())
    fp = _gh200_fp(root, nvml.c2c("0009:01:00.0"))
    d = bounds.describe(fp)
    assert d["name"].startswith("GH200")
    h2d, src = d["datapaths"]["h2d"]
    assert h2d == 447.1 and src.startswith("probe: NVLink-C2C, 10 of 10 links active") and d["datapaths"]["d2h"][0] == 447.1
    assert d["datapaths"]["host_memory"][1].startswith("paper:")  # what the probe cannot read stays the paper's
    host = d["host"]
    assert host["base_page"][0] == 65536 and host["thp_pmd"][0] == 512 << 20
    assert host["numa_balancing"] == (1, "probe: /proc/sys/kernel/numa_balancing")
    assert host["init_on_alloc"] == (False, "probe: /proc/cmdline: init_on_alloc=0")
    assert host["power_sensors"][0] == ["cpu", "grace", "module", "sysio"] and "power_sensors_missing" not in host
    assert host["c2c_links"][0] == (10, 10)
    # without C2C figures and with only the module's sensor: the paper's 450 stays, the missing sensors are named
    fp = _gh200_fp(root, None, {"hwmon": probe.hwmon_power(root)[:1], "gpus": []})
    d = bounds.describe(fp)
    assert d["datapaths"]["h2d"][0] == 450 and d["datapaths"]["h2d"][1].startswith("paper:")
    assert d["host"]["power_sensors_missing"][0] == ["grace", "cpu", "sysio"]
    page = table(_gh200_fp(root, {"links": 10, "active_links": 10, "gbps": 447.1, "source": "NVML"}))
    assert "Module Power Socket 0: 412.5 W" in page and "base page 64 KiB, THP 512 MiB" in page
    assert "NVLink-C2C 10 of 10 links active, 447.1 GB/s" in page and "init_on_alloc=False" in page


def test_fault_strides_start_at_the_base_page():
    assert plans.fault_cases({"host": {"page_size": 65536}})[0].params["stride"] == "64KiB,2MiB"
    assert plans.fault_cases({"host": {"page_size": 4096}})[0].params["stride"] == "4KiB,64KiB,2MiB"
