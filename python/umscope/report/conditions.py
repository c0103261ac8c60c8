"""The report's conditions section: the cases measured while the GPU was throttled or shared, from the NVML
readings taken around each case (umscope.conditions reads and judges them). It says what the run recorded:
`profile` and `place` runs record none (they sample the GPU over the program's run instead)."""

from umscope import conditions
from umscope.report.common import e
from umscope.report.registry import page_section

TITLE = "Conditions of the measurements"


def text(run, records) -> str:
    if run.get("kind") in ("profile", "place"):
        return ("<p class=note>This run kind records no conditions: NVML readings before and after each case are "
                "taken by <code>run</code>, <code>bench</code> and <code>app</code>"
                + (" (this profile's own samples of the GPU are in its section)." if run.get("kind") == "profile"
                   else ".") + "</p>")
    if not records:
        return "<p class=note>No case of this run left a measured record, so no conditions are shown.</p>" \
            + visible_gpus_note(run, records)
    return conditions.report_html(records, e) + visible_gpus_note(run, records)


def visible_gpus_note(run, records) -> str:
    """A line where the run was made with `--visible-gpus case`: how many cases saw their one GPU only (their
    records' visible_gpus), and that the others saw every GPU. Empty otherwise."""
    opts = run.get("options") if isinstance(run.get("options"), dict) else {}
    narrowed = {}
    for r in records:
        v = (r.get("extra") or {}).get("visible_gpus", r.get("visible_gpus"))
        if v is not None:
            narrowed.setdefault(str(v), set()).add(r.get("case_id"))
    if opts.get("visible_gpus") != "case" and not narrowed:
        return ""
    ran = "; ".join(f"{len(ids)} with CUDA_VISIBLE_DEVICES={e(v)}" for v, ids in sorted(narrowed.items())) or "0"
    return (f"<p class=note>This run was made with <code>--visible-gpus case</code>: a case that uses GPU 0 alone "
            f"ran with CUDA_VISIBLE_DEVICES narrowed to that GPU (its records' <code>visible_gpus</code>). Cases "
            f"with measured records that ran so: {ran}. Every other case saw every GPU. Its times are those of that "
            f"experiment, not of a default run (docs/method.md).</p>")


@page_section("conditions", TITLE, order=110)
def section(page) -> str:
    return f"<h2 id=conditions>{TITLE}</h2>" + text(page.run, page.records)
