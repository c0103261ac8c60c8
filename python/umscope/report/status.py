"""The banner at the top of every report: whether the run is complete, was interrupted (by which signal, during
which case) or failed; every planned case that did not run and every failed case with its reason; for
`profile` and `place`, the program's exit status and the end of its stderr.

Everything here is read from the store: the run's status and plan, its cases' outcomes, and the program's run
record. A planned case is one of the run's saved plan (`run`, `bench`, `app` keep it; `run --resume` reads it);
`profile` and `place` have one case, the program."""

from umscope.report.common import e, html_table, cell
from umscope.report.registry import page_section

TITLE = "Status"
BAD = ("failed", "timeout", "refused")
PROGRAM_KINDS = ("profile", "place")
STDERR_LINES = 12


def planned_ids(run) -> list:
    """The case ids of the run's saved plan, in plan order ([] where the run kind keeps none)."""
    from umscope.suite import plan_from_json
    try:
        return [c.case_id for c in plan_from_json(run.get("plan") or [])]
    except (KeyError, TypeError, AttributeError, ValueError):
        return []


def not_run(run, cases) -> list:
    """Planned case ids with no stored outcome, in plan order."""
    done = {c["case_id"] for c in cases if c.get("status")}
    return [cid for cid in planned_ids(run) if cid not in done]


def program_record(run, records):
    """The `run` record of a profile or place run (the program's exit status, signal, stderr), or None."""
    if run.get("kind") not in PROGRAM_KINDS:
        return None
    return next((r for r in records if r.get("op") == "run" and r.get("benchmark") in PROGRAM_KINDS), None)


def verdict(run, cases, records) -> tuple:
    """(word, sentence): 'complete', 'interrupted' or 'failed', and what happened, from the store alone."""
    prog = program_record(run, records)
    bad = [c for c in cases if c.get("status") in BAD]
    missing = not_run(run, cases)
    if prog is not None:
        x = prog.get("extra") or {}
        status = x.get("exit_status")
        if x.get("signal"):
            return "failed", f"the program was killed by {x['signal']} (exit status {status})"
        if status not in (0, None):
            return "failed", f"the program exited with status {status}"
        if bad:
            return "failed", bad[0].get("reason") or "the program's case failed"
        return "complete", "the program exited with status 0"
    if run.get("status") in ("interrupted", "running"):
        intr = (run.get("options") or {}).get("interrupted") if isinstance(run.get("options"), dict) else None
        by = f"by {intr['signal']}" if intr and intr.get("signal") else (
            "before it finished (the process ended without recording why)" if run.get("status") == "running"
            else "(the umscope that ran it did not record the signal)")
        during = f", during case {intr['case']}" if intr and intr.get("case") else ""
        return "interrupted", (f"interrupted {by}{during}: {len(cases) - len(bad)} of {len(planned_ids(run)) or '?'}"
                               f" planned cases stored, {len(missing)} did not run; `umscope run --resume "
                               f"{run['id']}` finishes it")
    if bad:
        return "failed", f"every planned case ran; {len(bad)} of {len(cases)} failed, timed out or were refused"
    if missing:
        return "interrupted", f"{len(missing)} planned cases have no outcome"
    n = len(cases)
    return "complete", (f"every one of the {n} planned case{'s' if n != 1 else ''} ran" if planned_ids(run)
                        else f"{n} case{'s' if n != 1 else ''} ran")


def counts_text(cases) -> str:
    counts = {}
    for c in cases:
        counts[c.get("status") or "no outcome"] = counts.get(c.get("status") or "no outcome", 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items()) or "no case finished"


def stderr_tail(text, lines=STDERR_LINES) -> str:
    return "\n".join((text or "").rstrip("\n").split("\n")[-lines:])


def section(run, cases, records) -> str:
    word, why = verdict(run, cases, records)
    colour = {"complete": "#e6f4ea", "interrupted": "#fff4d6", "failed": "#fde7e7"}[word]
    out = [f"<div id=status class=banner style=\"background:{colour}\"><b class=verdict>{word.upper()}</b> — "
           f"{e(why)}. Cases: {e(counts_text(cases))}."]
    prog = program_record(run, records)
    if prog is not None:
        x = prog.get("extra") or {}
        tail = stderr_tail(x.get("stderr_tail"))
        out.append(f"<br>Program <code>{e(x.get('command'))}</code>: exit status {e(x.get('exit_status'))}"
                   + (f" ({e(x['signal'])})" if x.get("signal") else "")
                   + (", stderr ended with:<pre class=stderr>" + e(tail) + "</pre>" if tail.strip() else
                      (", stderr was empty." if "stderr_tail" in x else ", stderr was not kept by the umscope that ran it.")))
        if run.get("kind") != "profile":  # profile's own section lists them beside its timeline
            out.extend(f"<br>Note: {e(n)}" for n in x.get("notes") or [])
    bad = [c for c in cases if c.get("status") in BAD]
    missing = not_run(run, cases)
    rows = [[c["case_id"], cell(c["status"], c["status"]), c.get("reason") or ""] for c in bad]
    intr = (run.get("options") or {}).get("interrupted") if isinstance(run.get("options"), dict) else None
    rows += [[cid, cell("not run", "failed"),
              "running when the run was interrupted" if intr and intr.get("case") == cid else
              "planned, not reached"] for cid in missing]
    if rows:
        shown = rows[:12]
        out.append(html_table(["case", "outcome", "reason"], shown,
                              None if len(rows) <= 12 else
                              f"{len(rows) - 12} more in <a href=#skipped>Skipped and failed cases</a>."))
    out.append("</div>")
    return "".join(out)


@page_section("status", TITLE, order=1)
def _page(page) -> str:
    return section(page.run, page.cases, page.all_records)
