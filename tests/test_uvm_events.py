"""The UVM driver's event queue read by libumtrace (native/profiler/uvm_events.cpp) and its summary
(python/umscope/profile/uvm_events.py). The queue itself needs the driver (tests/test_gpu.py runs it); here: the
decoding of the driver's entries, the start without a driver, and the summary of a trace."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from umscope.profile.uvm_events import summarise

ROOT = Path(__file__).resolve().parent.parent

# The driver's V2 layouts (uvm_types.h of NVIDIA's open kernel modules), written as its field order and types so the
# compiler places them: the decoder's hand-written offsets are checked against where the fields really fall.
HARNESS = r"""
#include "uvm_events.hpp"
#include <cstdint>
#include <cstring>
#include <cstdio>
struct Fault { uint8_t eventType, faultType; uint16_t gpuIndex, gpcId, clientId; uint64_t address, timeStamp,
               timeStampGpu; uint32_t batchId; uint8_t clientType, accessType; uint16_t pad; };
struct Replay { uint8_t eventType, clientType; uint16_t gpuIndex; uint32_t batchId; uint64_t timeStamp, timeStampGpu; };
struct Migration { uint8_t eventType, migrationCause; uint16_t pad, srcIndex, dstIndex; int32_t srcNid, dstNid;
                   uint64_t address, migratedBytes, beginTimeStamp, endTimeStamp, rangeGroupId, beginTimeStampGpu,
                   endTimeStampGpu; };
static_assert(sizeof(Migration) == uvm_events::kEntryBytes, "the largest V2 event fills the entry");
template <typename T> void put(const T& v) {
  unsigned char e[uvm_events::kEntryBytes] = {};
  std::memcpy(e, &v, sizeof v);
  std::string line;
  int t = uvm_events::format_entry(e, line);
  std::printf("%d %s", t, line.empty() ? "-\n" : line.c_str());
}
int main() {
  put(Fault{3, 2, 1, 7, 33, 0x7f0000201000ull, 111, 222, 4242, 1, 2, 0});
  put(Replay{4, 1, 1, 4242, 333, 444});
  put(Migration{2, 3, 0, 0, 1, -1, 0, 0x7f0000200000ull, 2097152, 10, 20, 0, 30, 40});
  unsigned char other[uvm_events::kEntryBytes] = {14};
  std::string line;
  std::printf("%d %s\n", uvm_events::format_entry(other, line), line.empty() ? "-" : line.c_str());
  std::mutex mu;
  uvm_events::start({}, stdout, mu);
  std::fflush(stdout);
  uvm_events::stop();  // never started: writes nothing
  std::mutex mu2;
  FILE* f = std::fopen("/dev/null", "r");
  uvm_events::start({fileno(f)}, stdout, mu2);  // a second start is refused without a line
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler to build the decoder's harness")
    d = tmp_path_factory.mktemp("uvmev")
    (d / "main.cpp").write_text(HARNESS)
    exe = d / "h"
    subprocess.run([cxx, "-std=c++17", "-O1", "-I", str(ROOT / "native/profiler"), str(d / "main.cpp"),
                    str(ROOT / "native/profiler/uvm_events.cpp"), "-lpthread", "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()


def test_driver_entries_decode_to_their_fields(harness):
    lines = [(int(x.split(" ", 1)[0]), x.split(" ", 1)[1]) for x in harness[:4]]
    (t, fault), (r, replay), (m, mig), (o, other) = lines
    assert (t, r, m, o) == (3, 4, 2, 14)
    assert json.loads(fault) == {"k": "uvm_fault", "g": 1, "b": 4242, "a": 0x7f0000201000, "acc": 2, "ft": 2,
                                 "gpc": 7, "cl": 33, "ct": 1, "t": 111, "tg": 222}
    assert json.loads(replay) == {"k": "uvm_replay", "g": 1, "b": 4242, "ct": 1, "t": 333, "tg": 444}
    assert json.loads(mig) == {"k": "uvm_migration", "src": 0, "dst": 1, "a": 0x7f0000200000, "n": 2097152,
                               "cause": 3, "t0": 10, "t1": 20, "tg0": 30, "tg1": 40}
    assert other == "-"  # an event type without a layout here is counted, not written


def test_without_the_driver_the_queue_says_why_and_stops_quietly(harness):
    rest = [json.loads(x) for x in harness[4:]]
    assert rest == [{"k": "uvm_events", "ok": False, "why": "no /dev/nvidia-uvm descriptor: No such file or directory"}]


def _trace():
    ev = [{"k": "uvm_events", "ok": True, "queue": 1 << 18}]
    # Batch 1: an entry with a merged instance (one time stamp), and a second entry on another page.
    ev += [{"k": "uvm_fault", "g": 1, "b": 1, "a": 0x1000, "acc": 1, "t": 100, "tg": 5},
           {"k": "uvm_fault", "g": 1, "b": 1, "a": 0x1000, "acc": 1, "t": 100, "tg": 6},
           {"k": "uvm_fault", "g": 1, "b": 1, "a": 0x3000, "acc": 2, "t": 130, "tg": 7},
           {"k": "uvm_replay", "g": 1, "b": 1, "t": 1100, "tg": 9},
           {"k": "uvm_fault", "g": 1, "b": 2, "a": 0x5000, "acc": 1, "t": 2000, "tg": 10},
           {"k": "uvm_replay", "g": 1, "b": 2, "t": 5000, "tg": 11},
           {"k": "uvm_migration", "src": 0, "dst": 1, "a": 0, "n": 65536, "cause": 2},
           {"k": "uvm_migration", "src": 0, "dst": 1, "a": 0, "n": 2 << 20, "cause": 3},
           {"k": "uvm_migration", "src": 1, "dst": 0, "a": 0, "n": 4096, "cause": 2}]
    return ev


def test_summary_counts_entries_as_the_driver_counts_them():
    s = summarise(_trace() + [{"k": "uvm_events_end", "n": [0] * 16, "dropped": [0] * 16}])
    assert s["on"] and s["complete"] and s["dropped"] == {}
    assert (s["gpu_fault_instances"], s["gpu_fault_entries"], s["batches"], s["replays"]) == (4, 3, 2, 2)
    assert s["fault_pages"] == 3 and s["faults_by_access"] == {"read": 3, "write": 1}
    assert s["migrated"] == {"htod": {"coherence": 65536, "prefetch": 2 << 20}, "dtoh": {"coherence": 4096}}
    assert s["entries_per_batch_median"] == 1.5 and s["pages_per_batch_median"] == 1.5
    assert s["batch_service_us_median"] == pytest.approx((1.0 + 3.0) / 2)  # (1100-100) and (5000-2000) ns


def test_summary_says_when_the_driver_dropped_events_or_the_queue_was_refused():
    s = summarise(_trace() + [{"k": "uvm_events_end", "n": [0] * 16, "dropped": [0, 0, 0, 5] + [0] * 12}])
    assert not s["complete"] and s["dropped"] == {"gpu_fault": 5}
    assert not summarise(_trace())["complete"]  # no end record: the program died before the tracer's exit
    off = summarise([{"k": "uvm_events", "ok": False, "why": "UVM_TOOLS_INIT_EVENT_TRACKER_V2: driver status 0x1f"}])
    assert off == {"on": False, "why": "UVM_TOOLS_INIT_EVENT_TRACKER_V2: driver status 0x1f"}
    assert summarise([{"k": "start"}]) == {}


def _write(tmp_path, lines):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_complete_driver_events_give_the_timelines_and_allocations(tmp_path):
    """Where the driver's events are complete, the migration timelines and per-allocation figures come from them
    (every byte) rather than from CUPTI's records (a share), on the trace's clock through the `clocks` reading."""
    from umscope.profile.output import trace_records
    from umscope.profile.tracer import parse_trace
    base = [{"k": "start", "t": 1_000_000_000}, {"k": "device", "id": 0, "bus": "0000:1B:00.0"},
            {"k": "mem", "op": 1, "a": 1 << 30, "b": 8 << 20},
            # CUPTI saw one of the two migrations
            {"k": "um", "c": 1, "v": 2 << 20, "s": 1_100_000_000, "e": 1_100_000_100, "a": 1 << 30, "src": 0, "dst": 0,
             "f": 3},
            {"k": "uvm_events", "ok": True}, {"k": "clocks", "raw": 5_000_000_000, "t": 1_000_000_000},
            {"k": "uvm_migration", "src": 0, "dst": 1, "a": 1 << 30, "n": 2 << 20, "cause": 3, "t0": 5_100_000_000,
             "t1": 5_900_000_000},  # t1: when the driver's worker passed it on, late: not the timeline's time
            {"k": "uvm_migration", "src": 0, "dst": 1, "a": (1 << 30) + (2 << 20), "n": 2 << 20, "cause": 2,
             "t0": 5_300_000_000, "t1": 5_900_000_000},
            {"k": "uvm_migration", "src": 1, "dst": 0, "a": 1 << 30, "n": 1 << 20, "cause": 2, "t0": 5_400_000_000,
             "t1": 5_900_000_000},
            {"k": "end"}]
    done = {"k": "uvm_events_end", "n": [0] * 16, "dropped": [0] * 16}
    tr = parse_trace(_write(tmp_path, base + [done]), ["00000000:1b:00.0"])
    assert tr["migrations_source"] == "the driver's events"
    assert tr["timeline"]["htod"] == [(0.1, 2 << 20), (0.3, 4 << 20)] and tr["timeline"]["dtoh"] == [(0.4, 1 << 20)]
    (a,) = tr["allocations"]
    assert (a["htod"], a["dtoh"]) == (4 << 20, 1 << 20)
    assert tr["totals"]["htod"] == 2 << 20  # CUPTI's own totals stay what the records hold
    um = trace_records(tr)[-1]
    assert um["migrations_source"] == "the driver's events" and um["allocations"][0]["htod"] == 4 << 20
    # Dropped events, or no clock reading: CUPTI's records as before, and said so.
    lost = dict(done, dropped=[0, 0, 1] + [0] * 13)
    tr = parse_trace(_write(tmp_path, base + [lost]), ["00000000:1b:00.0"])
    assert tr["migrations_source"] == "CUPTI records" and tr["allocations"][0]["htod"] == 2 << 20
    noclock = [x for x in base if x.get("k") != "clocks"] + [done]
    assert parse_trace(_write(tmp_path, noclock), ["00000000:1b:00.0"])["migrations_source"] == "CUPTI records"
    # Two GPUs on the host: the driver numbers its GPUs its own way, not by CUDA ordinal. Where CUPTI's records and
    # the driver's migrations each name one GPU (the program used one), the events are that GPU's, as on a host with
    # one GPU (session 25: on 2 x H200 a one-GPU program's events were left out).
    buses = ["00000000:1b:00.0", "00000000:1c:00.0"]
    two = base[:2] + [{"k": "device", "id": 1, "bus": "0000:1C:00.0"}] + base[2:] + [done]
    tr = parse_trace(_write(tmp_path, two), buses)
    assert tr["migrations_source"] == "the driver's events" and tr["allocations"][0]["htod"] == 4 << 20
    assert list(tr["timeline_by_gpu"]) == list(tr["by_gpu"]) == ["gpu0"]
    # CUPTI's records on both GPUs, or the driver's migrations to a second GPU: which is which is unknown, so
    # CUPTI's per-GPU records stay.
    both = two[:-2] + [dict(two[4], dst=1, s=1_200_000_000, e=1_200_000_100)] + two[-2:]
    assert parse_trace(_write(tmp_path, both), buses)["migrations_source"] == "CUPTI records"
    peer = two[:-2] + [dict(two[7], src=2, dst=0)] + two[-2:]
    assert parse_trace(_write(tmp_path, peer), buses)["migrations_source"] == "CUPTI records"
