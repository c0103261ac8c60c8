"""Exports of a store's records in the formats other tools read, one module per format.

Each writer is `write(runs, records) -> str`, where `runs` maps run id -> run row (with its
fingerprint) and `records` are the store's records (Store.records)."""

from umscope.errors import UsageError

FORMATS = ["jsonl", "csv", "nvbandwidth", "openmetrics", "caliper", "perfetto"]


def in_families(rec, families) -> bool:
    """Whether a record is of one of these report families (its benchmark; 'applications': every app record)."""
    if not families:
        return True
    return rec.get("benchmark") in families or ("applications" in families and rec.get("op") == "app")


def load(store, run_id=None, families=None):
    """(runs by id, records) of one run or of every run in the store, of the given families only (default all)."""
    ids = [run_id] if run_id is not None else [r["id"] for r in store.runs()]
    runs = {i: store.run(i) for i in ids}
    records = [r for r in store.records(run_id) if in_families(r, families)]
    return runs, records


def command(run_id, family=None, fmt="csv") -> str:
    """The `umscope export` command line that writes these numbers (the report prints one per section)."""
    return (f"umscope export --run {run_id} --format {fmt}" + (f" --benchmark {family}" if family else ""))


def export(store, fmt, run_id=None, families=None) -> str:
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r} ({', '.join(FORMATS)})")
    if fmt == "jsonl":
        return store.export("jsonl", run_id, [r for r in store.records(run_id) if in_families(r, families)])
    if fmt == "perfetto":
        from umscope.export import perfetto
        if run_id is None:
            raise UsageError("--format perfetto draws one profile run: give --run ID")
        return perfetto.write(store.run(run_id), store.records(run_id))
    runs, records = load(store, run_id, families)
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
