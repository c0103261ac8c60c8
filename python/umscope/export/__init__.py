"""Exports of a store's records in the formats other tools read, one module per format.

Each writer is `write(runs, records) -> str`, where `runs` maps run id -> run row (with its
fingerprint) and `records` are the store's records (Store.records)."""

from umscope.errors import UsageError

FORMATS = ["jsonl", "csv", "nvbandwidth", "openmetrics", "caliper"]


def load(store, run_id=None):
    """(runs by id, records) of one run or of every run in the store."""
    ids = [run_id] if run_id is not None else [r["id"] for r in store.runs()]
    runs = {i: store.run(i) for i in ids}
    records = store.records(run_id)
    return runs, records


def export(store, fmt, run_id=None) -> str:
    if fmt == "jsonl":
        return store.export("jsonl", run_id)
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r} ({', '.join(FORMATS)})")
    runs, records = load(store, run_id)
    if fmt == "csv":
        from umscope.export import csv_wide as mod
    elif fmt == "nvbandwidth":
        from umscope.export import nvbandwidth as mod
        if len(runs) != 1:
            raise UsageError("--format nvbandwidth describes one run: give --run ID")
    elif fmt == "openmetrics":
        from umscope.export import openmetrics as mod
    else:
        from umscope.export import caliper as mod
    return mod.write(runs, records)


def engine(rec):
    """'ce' (copy engines) or 'sm' (kernels) for copies, else None."""
    op = rec.get("op") or ""
    if op.startswith("ce-") or (rec.get("processor") or "").startswith("ce"):
        return "ce"
    if op.startswith("sm-"):
        return "sm"
    return None


def device_of(rec):
    """The GPU ordinal in a processor name like 'gpu0' or 'ce1', or None."""
    p = rec.get("processor") or ""
    digits = p.lstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits) if digits.isdigit() else None
