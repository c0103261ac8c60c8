"""No import cycles in the umscope package (issue 36): the graph of every module's umscope imports, those at
module level and those inside functions alike, has no cycle. A cycle hidden behind a function-level import
still ties the two modules together; the shared piece belongs in a module both import."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "python" / "umscope"


def module_name(path: Path) -> str:
    parts = ("umscope",) + path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set) -> set:
    """The umscope modules a file imports anywhere in it (a name imported from a package counts as its
    submodule where one exists, else as the package)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n and n != me and n.startswith("umscope"):
                out.add(n)
    return out


def graph() -> dict:
    files = [p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts]
    modules = {module_name(p) for p in files}
    g = {}
    for p in files:
        me = module_name(p)
        # a package's __init__ runs when any submodule is imported: an edge into a package's own submodule
        # from its __init__ is the package exposing it, not a cycle
        g[me] = {m for m in imports_of(p, modules) if not (p.name == "__init__.py" and m.startswith(me + "."))}
        if p.name != "__init__.py":
            g[me] = {m for m in g[me] if not me.startswith(m + ".")}  # importing one's own package: its __init__
    return g


def cycles(g: dict) -> list:
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_function_level_imports():
    g = cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    assert g == [["a", "b"]]
    src = graph()
    # model/commands.py imports the driver at module level; profile/tracer.py reads uvm_events
    assert "umscope.model.driver" in src["umscope.model.commands"]
    assert "umscope.profile.uvm_events" in src["umscope.profile.tracer"]


def test_no_two_modules_import_each_other():
    """Neither of a pair imports the other, at module level or inside a function (plans.py and scaleout.py,
    profile/tracer.py and profile/uvm_events.py, cli.py and place.py did: their shared pieces are now
    sizes.size_arg, native.validate_kind, profile/codes.py and report.html.save_report)."""
    g = graph()
    assert sorted((a, b) for a in g for b in g[a] if a < b and a in g.get(b, ())) == []


def test_no_import_cycle():
    """No longer cycle either (there was one of 23 modules through the command line: validate's registry
    checks reached plans and apps.llm, place reached cli, profile reached place; those pieces are now
    options.py, report.html.save_report and passthrough.py). A command module is imported by nothing it calls."""
    assert cycles(graph()) == []
    assert not [m for m, deps in graph().items() if "umscope.cli" in deps and m != "umscope.__main__"]
