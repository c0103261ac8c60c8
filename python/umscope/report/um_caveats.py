"""What the unified-memory totals of `umscope profile --um-trace` count, per CUPTI event kind, and what they
do not: shown next to every total in the profile report. Each statement is a measurement in this repository's
docs (docs/method.md, "What the unified-memory totals count"; docs/reference-h100.md, sections profile-qv,
profile-jacobi2d and gemm-placement, each with its commit, machine kind and command) or a property of the
API; where the cause of a shortfall is not known, it says so."""

SHORTFALL = ("on the H100 (driver 580) the counted bytes were 977.1 of the 2048 MiB state of a CPU-initialised QV "
             "circuit in managed memory (27 qubits) and 679.5 of the 1024 MiB of jacobi2d's arrays (managed), which "
             "the GPU then held; an explicit prefetch was counted in full (2048.0 of 2048 MiB), and so were the "
             "managed matrices of a GEMM at n = 4096 (docs/reference-h100.md, commit 0247c6b, sections profile-qv, "
             "profile-jacobi2d, gemm-placement); the cause is not established (issue 18)")

CAVEATS = {
    "htod": "migrations to the GPU that the driver reports as CUPTI unified-memory HtoD records, by cause "
            "(on-demand, speculative prefetch, explicit prefetch). A lower bound, not the data moved: " + SHORTFALL +
            ". Zero-copy reads (pinned, registered, host-preferred managed with accessed-by) migrate nothing and "
            "are not counted.",
    "dtoh": "migrations to the host that the driver reports (DtoH records: on-demand, prefetch, eviction). The "
            "same under-count as host-to-device applies; GPU writes to host-resident memory (zero copy) are not "
            "counted.",
    "gpu_fault": "GPU page-fault groups the driver reports: one record can stand for several faulting pages, so "
                 "this is not a page count; fault records were missing for a short program (issue 18).",
    "cpu_fault": "CPU page faults on managed memory that the driver handled and reported; the process's other "
                 "page faults (system memory, first touch) are not included.",
    "other": "events, not bytes: thrashing and throttling as the driver detects them, remote mappings it "
             "reports (the accesses through a remote map are not counted).",
    "derived": "ratios of the counts above: they inherit their under-count.",
}
