"""The report's machine section: host, CPU and caches, memory, NUMA, CUDA and every GPU with its unified-memory
attributes, as the probe found them when the run started."""

from umscope.probe import cuda_version_text
from umscope.report.common import html_table, th
from umscope.report.registry import page_section
from umscope.sizes import format_size

TITLE = "Machine"


def table(fp) -> str:
    if not fp:
        return "<p>No machine fingerprint stored.</p>"
    rows = []
    host, cpu, cuda = fp.get("host", {}), fp.get("cpu", {}), fp.get("cuda", {})
    rows.append(("Host", f"{host.get('hostname')} — {host.get('os')}, kernel {host.get('kernel')}"))
    if fp.get("umscope_version"):  # as built into the package (umscope.provenance)
        rows.append(("umscope", f"{fp['umscope_version']}, commit {fp.get('umscope_commit') or 'not recorded'}"))
    rows.append(("CPU", f"{cpu.get('model')} ({cpu.get('arch')}), {cpu.get('logical_cpus')} logical CPUs, "
                        f"{cpu.get('sockets')} socket(s)"))
    caches = ", ".join(f"L{c['level']} {c['type']} {format_size(c['bytes'])}" for c in cpu.get("caches", []))
    rows.append(("CPU caches", caches or "unknown"))
    rows.append(("Memory", f"page size {host.get('page_size')} B, THP {host.get('thp')}, "
                           f"MemTotal {format_size(host.get('memory', {}).get('MemTotal', 0) or 1)}"))
    pages, ks = host.get("pages") or {}, host.get("kernel_settings") or {}
    if pages or ks:
        ioa = "unknown" if ks.get("init_on_alloc") is None else ks["init_on_alloc"]
        rows.append(("Pages and kernel", f"base page {format_size(pages.get('base') or host.get('page_size') or 1)}"
                     + (f", THP {format_size(pages['thp_pmd'])}" if pages.get("thp_pmd") else "")
                     + f"; kernel.numa_balancing={ks.get('numa_balancing')}; init_on_alloc={ioa}"
                     + f" ({ks.get('init_on_alloc_source')})"))
    sensors = (fp.get("power") or {}).get("hwmon") or []
    if sensors:
        rows.append(("Power sensors (hwmon)", "; ".join(
            f"{s['label']}: {s['watts']:.1f} W" if s.get("watts") is not None else s["label"] for s in sensors)
            + " (when the run started)"))
    numa = "; ".join(f"node {n['id']}: {format_size(n['mem_bytes'] or 1)}, {len(n['cpus'])} CPUs"
                     for n in fp.get("numa", []))
    rows.append(("NUMA", numa or "no NUMA information"))
    rows.append(("CUDA", f"runtime {cuda_version_text(cuda.get('runtime_version'))}, driver "
                         f"{cuda.get('driver') or cuda_version_text(cuda.get('driver_version'))}"))
    for g in fp.get("gpus", []):
        link = g.get("link") or {}
        pcie = (f"PCIe gen {link.get('pcie_gen_current')} x{link.get('pcie_width_current')} now, "
                f"gen {link.get('pcie_gen_max')} x{link.get('pcie_width_max')} max") if link else "link unknown"
        c2c = g.get("c2c") or {}
        if c2c.get("links"):
            pcie = (f"NVLink-C2C {c2c['active_links']} of {c2c['links']} links active, "
                    f"{c2c.get('gbps') or '?'} GB/s per direction (NVML)")
        rows.append((f"GPU {g['device']}", f"{g['name']} (cc {g['compute_capability']}), {g['sms']} SMs, "
                     f"{format_size(g['total_mem'])}, L2 {format_size(g['l2_bytes'])}, {pcie}, bus {g['pci_bus_id']}"))
        attrs = ["managed_memory", "concurrent_managed_access", "pageable_memory_access",
                 "pageable_memory_access_uses_host_page_tables", "host_native_atomics",
                 "direct_managed_access_from_host", "can_use_host_pointer_for_registered_mem"]
        rows.append((f"GPU {g['device']} unified memory",
                     f"addressing: {g['addressing']}; " + ", ".join(f"{a}={int(bool(g.get(a)))}" for a in attrs)
                     + f", numa_id={g.get('numa_id')}"))
    if not fp.get("gpus"):
        rows.append(("GPU", f"none: {cuda.get('why_no_gpu')}"))
    return html_table(None, [[th(k), v] for k, v in rows])


@page_section("machine", TITLE, order=20)
def section(page) -> str:
    return f"<h2>{TITLE}</h2>\n" + table(page.fp)
