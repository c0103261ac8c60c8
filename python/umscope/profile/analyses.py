"""Analyses of a unified-memory trace: NVTX ranges and marks, and the studies' ratios (faults per
migration, eviction against migration)."""


def nvtx_ranges(markers, t0):
    """NVTX ranges [(name, start s, end s)] and instant marks [(name, s)] from CUPTI marker records."""
    opened, ranges, instants = {}, [], []
    for m in sorted(markers, key=lambda m: m["t"]):
        t = round((m["t"] - t0) / 1e9, 6)
        if m["fl"] & 1:
            instants.append((m.get("n") or "mark", t))
        elif m["fl"] & 2:
            opened[m["id"]] = (m.get("n") or f"range {m['id']}", t)
        elif m["fl"] & 4 and m["id"] in opened:
            name, start = opened.pop(m["id"])
            ranges.append((name, start, t))
    ranges += [(name, start, None) for name, start in opened.values()]  # never closed
    return sorted(ranges, key=lambda r: r[1]), instants


def migration_ratios(totals, events, by_cause) -> dict:
    """GPU faults per host-to-device migration record, and bytes evicted (device-to-host, cause eviction)
    per byte migrated host-to-device; None where there was no migration."""
    migrations = events["htod"]
    return {"faults_per_migration": totals["gpu_fault"] / migrations if migrations else None,
            "eviction_to_migration": (by_cause["dtoh"].get("eviction", 0) / totals["htod"]) if totals["htod"] else None}
