"""What the unified-memory totals of `umscope profile --um-trace` count, per CUPTI event kind, and what they
do not: shown next to every total in the profile report. Each statement is a measurement in this repository's
docs (docs/tracing.md, measured with the um-truth programs; docs/method.md, "What the unified-memory totals
count") or a property of the API; where the cause of a shortfall is not known, it says so."""

SHORTFALL = ("on the H100 (driver 580) CUPTI's records of GPU-fault-driven migrations were incomplete: the UVM "
             "driver drops events when its tools event queue is full (10-18% of a CPU-initialised 1 GiB read reached "
             "the trace; with fewer faults at once, 99.8-100%); explicit prefetches and migrations to the host were "
             "complete. The driver's own counters, shown beside as \"UVM driver's counters\", count every byte, and "
             "`--uvm-events` reads the driver's events into a queue of umscope's own, with every cause "
             "(docs/tracing.md)")

CAVEATS = {
    "htod": "migrations to the GPU that the driver reports as CUPTI unified-memory HtoD records, by cause "
            "(on-demand, speculative prefetch, explicit prefetch). A lower bound, not the data moved: " + SHORTFALL +
            ". Zero-copy reads (pinned, registered, host-preferred managed with accessed-by) migrate nothing and "
            "are not counted.",
    "dtoh": "migrations to the host that the driver reports (DtoH records: on-demand, prefetch, eviction). On the "
            "H100 every CPU-fault-driven and prefetched byte was reported (99.95-100%, docs/tracing.md); the same "
            "queue could drop them under a burst. GPU writes to host-resident memory (zero copy) are not counted.",
    "gpu_fault": "GPU page-fault records the driver reports (each with a count of faults): the same queue drops "
                 "them under many faults at once, so this is a lower bound; the driver's counter (beside) counts "
                 "the faults it serviced, after merging duplicates.",
    "cpu_fault": "CPU page faults on managed memory that the driver handled and reported (one record each; equal "
                 "to the driver's counter in every um-truth case); the process's other page faults (system memory) "
                 "are not included.",
    "other": "thrashing (bytes of the regions the driver found thrashing) and throttling as the driver detects "
             "them, remote mappings (bytes mapped: 1 GiB of host-preferred memory gave 1 GiB); the accesses "
             "through a remote map (zero copy) are not counted by any kind.",
    "derived": "ratios of the counts above: they inherit their under-count.",
}


def trace_rows(ux) -> list:
    """Rows for the profile report's unified-memory table beyond the totals: one per GPU traced (the GPU each
    record came from), and the tracer's own accounting (kinds CUPTI refused, records dropped or lost), so a
    total is never shown as complete when the trace says it is not."""
    rows = []
    drv = (ux.get("driver_counters") or {}).get("all")
    if drv:
        rows.append(("UVM driver's counters", f"{drv.get('htod', 0) / 2**20:.1f} MiB in, {drv.get('dtoh', 0) / 2**20:.1f} "
                     f"MiB out, {drv.get('cpu_faults', 0)} CPU faults, {drv.get('gpu_faults', 0)} GPU faults",
                     "the driver's own totals (nvidia-uvm-tools counters): every migration, without addresses, times "
                     "or causes"))
        share = ux.get("record_shortfall") or {}
        short = {d: v for d, v in share.items() if v is not None and v < 0.98}
        if short:
            rows.append(("records' share", ", ".join(f"{'in' if d == 'htod' else 'out'} {100 * v:.1f}%"
                                                     for d, v in short.items()),
                         "CUPTI's records carry only this share of the bytes the driver counted: the driver dropped "
                         "the rest of the events when its tools event queue was full (GPU-fault-driven migrations). "
                         "Causes, timelines and per-allocation figures come from the records and are short by as "
                         "much; use the driver's counters for totals"))
    ev = ux.get("driver_events") or {}
    if ev.get("on"):
        moved = "; ".join(f"{'in' if way == 'htod' else 'out' if way == 'dtoh' else 'GPU to GPU'}: " +
                          ", ".join(f"{c} {b / 2**20:.1f} MiB" for c, b in sorted(causes.items()))
                          for way, causes in ev.get("migrated", {}).items()) or "no migration"
        per = ev.get("entries_per_batch_median")
        rows.append(("UVM driver's events",
                     f"{ev['gpu_fault_entries']} GPU fault entries ({ev['gpu_fault_instances']} written by the GPU) "
                     f"in {ev['batches']} batches" + (f" (median {per:g} entries, {ev['batch_service_us_median']:.0f} "
                                                      f"us each)" if per is not None and
                                                      ev.get("batch_service_us_median") is not None else "") +
                     f"; {moved}",
                     "the driver's own event queue, read by the tracer (--uvm-events): " +
                     ("complete, nothing dropped: these causes are every migrated byte's"
                      if ev.get("complete") else
                      "INCOMPLETE (" + (", ".join(f"{n} {k} events dropped" for k, n in ev["dropped"].items())
                                        if ev.get("dropped") else "the program ended before the tracer's exit") +
                      "): lower bounds")))
    elif ev:
        rows.append(("UVM driver's events", "not read", f"--uvm-events was asked for; the driver said: {ev.get('why')}"))
    by_gpu = ux.get("by_gpu") or {}
    devices = ux.get("devices") or {}
    if len(by_gpu) > 1:
        for g in sorted(by_gpu):
            t = by_gpu[g]
            rows.append((f"{g}" + (f" ({devices[g]})" if g in devices else ""),
                         f"{t.get('htod', 0) / 2**20:.1f} MiB in, {t.get('dtoh', 0) / 2**20:.1f} MiB out, "
                         f"{t.get('gpu_fault', 0)} fault groups"
                         + ("" if t.get("kernels") is None else f", {t['kernels']} kernels"),
                         "records labelled with the GPU they came from (CUDA ordinal matched to umscope's GPU by "
                         "PCI bus id)"))
    refused = ux.get("kinds_refused") or []
    if refused:
        rows.append(("event kinds not enabled", ", ".join(refused),
                     "CUPTI refused to configure these unified-memory counter kinds: their totals are absent, "
                     "not zero"))
    lost = ux.get("records_lost")
    if ux.get("dropped") or lost:
        rows.append(("records missing", f"{ux.get('dropped') or 0} dropped by CUPTI, {lost or 0} written but not read",
                     "the totals above are short by these records"))
    return rows
