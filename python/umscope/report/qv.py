"""The qv application (Quantum Volume): time per circuit and per layer by mode and width, initialisation
against computation (the GH200 study's Fig. 9), the state's footprint, the bandwidth each gate reached."""

from collections import OrderedDict

from umscope.report.common import e, num
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
        rows.append(f"<tr><td>{e(x.get('mode'))}</td><td>{e(x.get('init'))}</td><td class=num>{e(x.get('qubits'))}</td>"
                    f"<td>{e(x.get('precision'))}</td><td class=num>{e(size_tick(r['bytes']))}</td>"
                    f"<td class=num>{num(x.get('total_ms'))}</td><td class=num>{num(x.get('init_ms'))}</td>"
                    f"<td class=num>{num(x.get('compute_ms'))}</td><td class=num>{r['median']:.4g}</td>"
                    f"<td class=num>{num(gx.get('gate_ms'))}</td><td class=num>{num(g.get('median'))}</td>"
                    f"<td class=num>{(100 * gx['efficiency']) if gx.get('efficiency') else 0:.0f}%</td>"
                    f"<td class=num>{num(x.get('fidelity'))}</td></tr>")
    out = []
    if groups:
        out.append(hbar_chart(list(groups.items()), "ms", "Quantum Volume: time by phase (ms, log scale)", log=True))
    out.append("<table><tr><th>mode</th><th>init</th><th>qubits</th><th>precision</th><th>state</th><th>total ms</th>"
               "<th>init ms</th><th>compute ms</th><th>ms per layer</th><th>ms per gate</th><th>gate GB/s</th>"
               "<th>of bound</th><th>fidelity</th></tr>" + "".join(rows) + "</table><p class=note>A gate reads and "
               "writes the whole state once, so gate GB/s = 2 × state / time per gate, against the memory's bound. "
               "Fidelity is against the CPU reference (double precision), where checked.</p>")
    return "".join(out)


@family_section("qv")
def section(bench, recs, page=None) -> str:
    return charts(recs)
