"""The codes libumtrace writes for CUPTI's unified-memory records: the cause of a migration, the kind of a
GPU access and the counter kinds. Shared by the tracer (its records) and uvm_events (the driver's events)."""

CAUSES = {0: "unknown", 1: "user", 2: "coherence", 3: "prefetch", 4: "eviction", 5: "access counters"}
ACCESS = {0: "unknown", 1: "read", 2: "write", 3: "atomic", 4: "prefetch"}
COUNTERS = {1: "htod", 2: "dtoh", 3: "cpu_fault", 4: "gpu_fault", 5: "thrashing", 6: "throttling", 7: "remote_map",
            8: "dtod"}
