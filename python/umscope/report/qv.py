"""The qv application (Quantum Volume): time per circuit and per layer by mode and width, initialisation
against computation (the GH200 study's Fig. 9), the state's footprint, the bandwidth each gate reached."""

from collections import OrderedDict

from umscope.report.common import html_table, num, num_cell
from umscope.report.registry import family_section
from umscope.report.svg import hbar_chart, size_tick


def charts(recs) -> str:
    """Time per circuit and per layer by mode and width; initialisation against computation (the GH200
    study's Fig. 9); the state's footprint; the bandwidth each gate reached."""
    circuits = [r for r in recs if r["op"] == "circuit"]
    gates = {(r["case_id"], (r.get("extra") or {}).get("qubits")): r for r in recs if r["op"] == "gate"}
    phases = ["alloc_ms", "init_ms", "prefetch_ms", "transfer_ms", "compute_ms", "measure_ms", "back_ms", "free_ms"]
    groups = OrderedDict()
    rows = []
    for r in circuits:
        x = r.get("extra") or {}
        label = f"{x.get('mode')} · init {x.get('init')} · {x.get('qubits')} qubits · {x.get('precision')}"
        groups[label] = [(p[:-3], x[p], None, None) for p in phases if x.get(p)]
        g = gates.get((r["case_id"], x.get("qubits"))) or {}
        gx = g.get("extra") or {}
        rows.append([x.get("mode"), x.get("init"), num_cell(x.get("qubits")), x.get("precision"),
                     num_cell(size_tick(r["bytes"])), num_cell(num(x.get("total_ms"))), num_cell(num(x.get("init_ms"))),
                     num_cell(num(x.get("compute_ms"))), num_cell(f"{r['median']:.4g}"), num_cell(num(gx.get("gate_ms"))),
                     num_cell(num(g.get("median"))),
                     num_cell(f"{(100 * gx['efficiency']) if gx.get('efficiency') else 0:.0f}%"),
                     num_cell(num(x.get("fidelity")))])
    out = []
    if groups:
        out.append(hbar_chart(list(groups.items()), "ms", "Quantum Volume: time by phase (ms, log scale)", log=True))
    out.append(html_table(
        ["mode", "init", "qubits", "precision", "state", "total ms", "init ms", "compute ms", "ms per layer",
         "ms per gate", "gate GB/s", "of bound", "fidelity"], rows,
        "A gate reads and writes the whole state once, so gate GB/s = 2 × state / time per gate, against the "
        "memory's bound. Fidelity is against the CPU reference (double precision), where checked."))
    return "".join(out)


@family_section("qv")
def section(bench, recs, page=None) -> str:
    return charts(recs)
