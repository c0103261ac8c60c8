"""The host-link bound of a zero-copy decode in the transactions SM reads use (the llm application's
host-resident placements).

A kernel that reads host memory in place asks the link for the data in read requests, and the host answers
each with a completion TLP: its payload behind a header, framed by the physical and data-link layers. The
datasheet rate (PCIe gen 5 x16: 32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s per direction) counts every
byte on the wire, so the payload the link can carry is

    protocol bound = datasheet GB/s x payload / (payload + per-TLP overhead)

with, per completion TLP:
- payload and header bytes measured on this machine with the PCIe counters: umbench's `linkbytes`
  family (a kernel reads a pinned, mapped buffer of known bytes once) under libumcounters' range profiler,
  counter set `link`. `pcie__read_bytes.sum` counts what the GPU received (completions: payload + headers),
  `pcie__write_bytes.sum` what it sent (the read requests); requests = sent bytes / REQUEST_HEADER_BYTES,
  payload per completion = known bytes / requests, header per completion = (received - known) / requests.
- FRAMING_BYTES, from the PCI Express Base Specification (Revision 3.0 and later, non-flit mode, which gen 3
  to gen 5 links use): at 8 GT/s and above each TLP starts with a 4-byte STP framing token (Physical Layer,
  "Framing Tokens": TLP length, frame CRC and parity, and the 12-bit sequence number of the Data Link Layer)
  and ends with the Data Link Layer's 4-byte LCRC ("LCRC, Sequence Number, and Retry Management").
The bound leaves out what the link also carries in that direction (flow-control and ACK DLLPs, SKP ordered
sets), so it is an upper bound on the payload rate. umbench's record of the operation and the counters are
kept with the result (`measure`), and the bound names its source (`protocol_bound`)."""

import json
import os
import subprocess
import tempfile
import time

# PCIe non-flit framing per TLP at 8 GT/s and above: STP token (4 B, with the sequence number) + LCRC (4 B).
FRAMING_BYTES = 4 + 4
FRAMING_SOURCE = ("PCI Express Base Specification rev. 3.0-5.0 (8 GT/s and above, non-flit): 4-byte STP "
                  "framing token + 4-byte LCRC per TLP")
# A memory read request with a 64-bit address: a 4-DW header and no data (PCIe Base Specification, Transaction
# Layer, "Memory, I/O, and Configuration Request Rules"); host memory above 4 GiB needs 64-bit addresses.
REQUEST_HEADER_BYTES = 16
MEASURE_BYTES = 1 << 30


def from_counters(known, pcie_read, pcie_write) -> dict:
    """The per-TLP split of one zero-copy read of `known` bytes, from its PCIe counters (bytes)."""
    if not (known and pcie_read and pcie_write) or pcie_read < known:
        raise ValueError(f"PCIe counters do not describe a read of {known} bytes: received {pcie_read}, "
                         f"sent {pcie_write}")
    requests = pcie_write / REQUEST_HEADER_BYTES
    return {"payload_bytes": known, "pcie_read_bytes": pcie_read, "pcie_write_bytes": pcie_write,
            "requests": requests, "completion_payload": known / requests,
            "completion_header": (pcie_read - known) / requests}


def protocol_bound(datasheet_gbps, m) -> tuple:
    """(GB/s, source): the payload rate of the datasheet link in completions of the measured split `m`."""
    p, h = m["completion_payload"], m["completion_header"]
    gbps = datasheet_gbps * p / (p + h + FRAMING_BYTES)
    src = (f"protocol: datasheet {datasheet_gbps:.1f} GB/s x {p:.0f} / ({p:.0f} + {h:.1f} + {FRAMING_BYTES}): "
           f"{p:.0f}-byte completions with {h:.1f}-byte headers (PCIe counters, {m.get('source', 'measured')}) "
           f"and {FRAMING_BYTES} bytes of framing and LCRC per TLP ({FRAMING_SOURCE})")
    return gbps, src


def measure(nbytes=MEASURE_BYTES, timeout=120) -> dict:
    """Runs umbench's linkbytes zero-copy read under libumcounters (range profiler, link set) and returns
    from_counters' split of the measured launch plus its source; raises RuntimeError with the reason when the
    counters cannot be read here (no libumcounters, profiling refused, no GPU)."""
    from umscope import native
    from umscope.profile import hwcounters as hc
    lib = hc.library_path()
    if lib is None:
        raise RuntimeError("libumcounters is not built (no CUPTI at build time)")
    with tempfile.TemporaryDirectory(prefix="umscope-link-") as d:
        out = os.path.join(d, "counters.jsonl")
        env = dict(os.environ, CUDA_INJECTION64_PATH=lib, **hc.environment(out, ("kernel",), "link", 1000))
        argv = [native.umbench_path(), "run", "linkbytes", "--op", "zerocopy-read", "--bytes", str(nbytes),
                "--reps", "1", "--warmup", "0", "--gap-ms", "50"]
        res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
        recs, status = native.parse_output(res.stdout)
        rec = next((r for r in recs if "known_link_bytes" in r), None)
        if rec is None:
            raise RuntimeError(f"umbench linkbytes failed: {(status or {}).get('reason') or res.stderr[-300:]}")
        parsed = hc.read(out)
        if parsed["refused"] or parsed["errors"]:
            raise RuntimeError(f"the PCIe counters could not be read: {str(parsed['errors'][:1])[:300]}")
        # The first read_kernel launch reads nothing (module load, before the measured operation).
        reads = [b for name, b in hc.per_launch(parsed, None) if "read_kernel" in name][1:]
        if not reads or not reads[-1].get("pcie_read") or not reads[-1].get("pcie_write"):
            raise RuntimeError("no PCIe counters for the measured read kernel")
    m = from_counters(rec["known_link_bytes"], reads[-1]["pcie_read"], reads[-1]["pcie_write"])
    m.update(source=f"umbench linkbytes --op zerocopy-read --bytes {nbytes}, CUPTI range profiler "
                    "(pcie__read_bytes.sum, pcie__write_bytes.sum) on " +
                    time.strftime("%Y-%m-%d", time.gmtime()),
             gbps_uncounted=rec.get("gbps"))
    return m


def load(path) -> dict:
    """A split saved by `--out` (or any JSON with the three counters): the per-TLP split recomputed from them."""
    with open(path, encoding="utf-8") as f:
        m = json.load(f)
    return dict(m, **from_counters(m["payload_bytes"], m["pcie_read_bytes"], m["pcie_write_bytes"]))


def main(argv=None) -> int:
    """`python -m umscope.apps.llm_link [--out FILE]`: measure the split and print it (JSON) with the bound
    of the probed host link."""
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="PCIe completion payload and header of SM zero-copy reads, and the "
                                             "host-link protocol bound")
    ap.add_argument("--out", help="also write the measurement (JSON) to this file")
    ap.add_argument("--bytes", type=int, default=MEASURE_BYTES)
    a = ap.parse_args(argv)
    if a.bytes < (1 << 20) or a.bytes % 4096:
        sys.stderr.write("llm_link: error: --bytes must be a multiple of 4096, at least 1 MiB\n")
        return 2
    try:
        m = measure(a.bytes)
    except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
        sys.stderr.write(f"llm_link: {e}\n")
        return 1
    from umscope import probe
    from umscope.model import bounds
    h2d = bounds.describe(probe.probe())["datapaths"].get("h2d")
    if h2d:
        m["protocol_gbps"], m["protocol_source"] = protocol_bound(h2d[0], m)
        m["datasheet_gbps"], m["datasheet_source"] = h2d
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(m, f)
    print(json.dumps(m))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
