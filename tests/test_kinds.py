"""The allocation interfaces as memory kinds (async: cudaMallocAsync pools, vmm: cuMemCreate/cuMemMap, hostalloc:
cudaHostAlloc flags): their specs, their place in the registry and what records say of them, and their skip
without a GPU. Their measurements are GPU tests (tests/test_kinds_gpu.py)."""
import json
import re

import pytest

from conftest import run_cli, umbench
from umscope import native, plans, registry
from umscope.errors import UsageError


@pytest.mark.parametrize("spec,canonical", [
    ("async", "async,pool=device"),
    ("async,pool=host", "async,pool=host"),
    ("async,pool=host:3", "async,pool=host:3"),
    ("vmm", "vmm,location=device"),
    ("vmm,location=host", "vmm,location=host"),
    ("vmm,location=host:0", "vmm,location=host:0"),
    ("hostalloc", "hostalloc,first_touch=cpu,flags=default"),
    ("hostalloc,flags=mapped+wc+portable", "hostalloc,first_touch=cpu,flags=mapped+wc+portable"),
    ("hostalloc,flags=wc,first_touch=gpu", "hostalloc,first_touch=gpu,flags=wc"),
])
def test_new_kinds_parse_to_their_canonical_spec_with_defaults_written(spec, canonical):
    res = umbench("check-kind", spec)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == canonical


@pytest.mark.parametrize("spec,message", [
    ("async,pool=gpu", "policy pool=gpu not understood (values: device|host|host:N)"),
    ("async,pool=host:N", "policy pool=host:N not understood"),  # the placeholder is not a value
    ("async,pool=host:", "policy pool=host: not understood"),
    ("async,pool=host:-1", "policy pool=host:-1 not understood"),
    ("async,pool=host:1234567", "policy pool=host:1234567 not understood"),
    ("async,pool=device+host", "policy pool=device+host not understood"),  # one value, not a list
    ("async,first_touch=cpu", "kind 'async' takes no policy 'first_touch'"),
    ("vmm,location=numa:0", "policy location=numa:0 not understood (values: device|host|host:N)"),
    ("vmm:0", "kind 'vmm' takes no ':' argument"),
    ("hostalloc,flags=wc+bogus", "policy flags=wc+bogus not understood (values: default|mapped|wc|portable)"),
    ("hostalloc,flags=", "policy flags= not understood"),
    ("hostalloc,page=thp", "kind 'hostalloc' takes no policy 'page'"),
])
def test_bad_specs_of_new_kinds_are_one_line_usage_errors(spec, message):
    res = umbench("check-kind", spec)
    assert res.returncode == 2
    assert res.stderr.strip() == message or res.stderr.startswith(message), res.stderr
    with pytest.raises(UsageError):
        plans.validate_kind(spec)


def test_the_registry_declares_the_new_kinds_with_their_policies_and_defaults():
    kinds = {k["name"]: k for k in json.loads(umbench("list", "--json").stdout)["kinds"]}
    for name, policy, values, default in (("async", "pool", ["device", "host", "host:N"], "device"),
                                          ("vmm", "location", ["device", "host", "host:N"], "device"),
                                          ("hostalloc", "flags", ["default", "mapped", "wc", "portable"], "default")):
        k = kinds[name]
        assert k["needs_cuda"] and not k["gpu_needs_hmm_or_ats"] and not k["needs_peer"] and not k["takes_arg"]
        p = {x["key"]: x for x in k["policies"]}[policy]
        assert (p["values"], p["default"]) == (values, default)
        assert p["joined"] == (policy == "flags")
    assert {x["key"]: x for x in kinds["managed"]["policies"]}["advise"]["joined"]
    assert {x["key"]: x for x in kinds["hostalloc"]["policies"]}["first_touch"]["default"] == "cpu"
    assert set(registry.kinds()) >= {"async", "vmm", "hostalloc"}


def test_umscope_list_shows_the_new_kinds_and_their_defaults():
    res = run_cli("list")
    assert res.returncode == 0, res.stderr
    for line in ("async ", "vmm ", "hostalloc "):
        assert re.search(rf"^  {line}", res.stdout, re.M), res.stdout
    assert "pool=device|host|host:N" in res.stdout and "[default device]" in res.stdout
    assert "flags=default|mapped|wc|portable" in res.stdout


def _status(res):
    return [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")][-1]


@pytest.mark.skipif(bool(native.native_info().get("gpus")), reason="the skip path needs a machine without a GPU")
@pytest.mark.parametrize("kind", ["async", "async,pool=host", "vmm", "vmm,location=host:0",
                                  "hostalloc,flags=mapped+wc+portable"])
@pytest.mark.parametrize("family", [("cpu-stream", "--threads", "1", "--ops", "read"), ("latency", "--processor", "cpu")])
def test_without_a_gpu_the_new_kinds_skip_with_the_reason(kind, family):
    """A CPU-only case of a CUDA-allocated kind skips (exit 0, one reason), as pinned does: nothing measured."""
    res = umbench("run", *family[:1], "--kind", kind, "--bytes", "1M", *family[1:])
    st = _status(res)
    assert res.returncode == 0 and st["status"] == "skipped", res.stdout
    why = native.native_info().get("why_no_gpu") or "no GPU"
    assert why in st["reason"] and "\n" not in st["reason"], st["reason"]
    if family[0] == "cpu-stream":  # the case itself needs no GPU: the kind says it does
        assert st["reason"].startswith(f"kind '{kind.split(',')[0]}' needs a GPU"), st["reason"]


@pytest.mark.skipif(bool(native.native_info().get("gpus")), reason="the skip path needs a machine without a GPU")
def test_without_a_gpu_umscope_bench_records_the_new_kinds_as_skipped(store_path):
    res = run_cli("bench", "copy", "--kind", "async", "--kind", "vmm,location=host:0", "--kind", "hostalloc,flags=wc",
                  "--size", "1M", "--store", store_path, "--json")
    assert res.returncode == 0, res.stderr
    from umscope.store import Store
    s = Store(store_path)
    cases = s.cases(s.run()["id"])
    assert cases and all(c["status"] == "skipped" for c in cases)


@pytest.mark.skipif(bool(native.native_info().get("gpus")), reason="the skip path needs a machine without a GPU")
def test_without_a_gpu_every_cuda_kind_skips_through_its_own_allocation():
    """Each CUDA kind the registry lists reaches its own allocation (its entry's KindOps) and skips with its name."""
    kinds = json.loads(umbench("list", "--json").stdout)["kinds"]
    cuda = [k["name"] + (":1" if k["takes_arg"] else "") for k in kinds if k["needs_cuda"]]
    assert {"device", "peer:1", "managed", "pinned", "registered", "async", "vmm", "hostalloc"} <= set(cuda)
    for kind in cuda:
        st = _status(umbench("run", "cpu-stream", "--kind", kind, "--bytes", "1M", "--threads", "1", "--ops", "read"))
        name = kind.split(":")[0]
        assert st["status"] == "skipped" and st["reason"].startswith(f"kind '{name}' needs "), (kind, st)


def test_buffer_and_kind_place_ask_for_no_kind_by_its_name():
    """A Buffer allocates, frees and locates a kind through its registry entry (issue 36): buffer.cpp compares no
    kind name, and kind_place compares none but the 'none' of a record that measures no memory."""
    from pathlib import Path
    memory = Path(__file__).resolve().parent.parent / "native" / "memory"
    compare = re.compile(r'(name|\bn)\s*[!=]=\s*"')
    assert not [l for l in (memory / "buffer.cpp").read_text().splitlines() if compare.search(l)]
    kinds = (memory / "kinds.cpp").read_text()
    place = kinds[kinds.index("KindPlace kind_place("):]
    place = place[:place.index("\n}\n")]
    assert [m.group(0) for m in re.finditer(r'name\s*[!=]=\s*"\w+"', place)] == ['name == "none"']
