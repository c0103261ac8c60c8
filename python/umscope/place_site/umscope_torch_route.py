"""How `umscope place` puts a PyTorch program's CUDA memory in a kind while PyTorch's allocator API keeps
working and telling the truth.

The route: PyTorch's own caching allocator stays the current allocator, so memory_allocated, memory_stats,
memory_summary, reset_peak_memory_stats, CUDA graphs with their private pools, torch.compile's CUDA-graph
trees and the out-of-memory messages are PyTorch's own; only the segments it takes from the driver come from
libumalloc, in the kind. A torch.cuda.MemPool whose allocator is libumalloc (CUDAPluggableAllocator) is made
the pool of every allocation on the device, from every thread and stream (autograd's backward threads
included), by torch._C._cuda_beginAllocateToPool; torch.cuda.use_mem_pool would route one thread only.

PyTorch picks an allocation's pool from its list of routings in order, the first that claims the
allocation's stream winning. A CUDA graph capture, the program's own use_mem_pool and torch.compile's graph
trees add their routing after ours, so each is put ahead of ours as it starts (ours is ended and begun again
behind it). A graph that names no pool gets a pool of its own served by libumalloc (what the captured step
allocates is placed too), and so does each torch.cuda.graph_pool_handle().

empty_cache: PyTorch frees a private pool's free segments only once nothing uses the pool, so empty_cache()
retires the pool (PyTorch frees its free segments now, the others after their tensors die) and routes the
device to a fresh one, then empties PyTorch's own pools as usual.

Devices: the current device is routed when CUDA starts in the program, another one when torch.cuda.set_device
or torch.cuda.device makes it current. Memory of a device the program never makes current stays PyTorch's
device memory; such memory is reported at exit (one line on stderr, report_outside)."""
import sys
import threading


class Route:
    def __init__(self, torch, lib):
        self.torch = torch
        self.alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "umscope_alloc", "umscope_free")
        C = torch._C
        self._begin_all, self._end, self._release = (C._cuda_beginAllocateToPool, C._cuda_endAllocateToPool,
                                                     C._cuda_releasePool)
        self.pools = {}         # device -> the MemPool every allocation on the device goes to
        self.graph_pools = []   # pools handed to graphs: kept for the process (graphs share pools by id)
        self.lock = threading.RLock()
        self.form = None        # how this PyTorch's _cuda_beginAllocateToPool is called

    def _begin(self, device, pool_id):
        if self.form is None:
            try:
                self._begin_all(device, pool_id)
                self.form = "device"
                return
            except TypeError:
                self.form = "filter"
        if self.form == "device":
            self._begin_all(device, pool_id)
        else:
            self._begin_all(device, pool_id, _every_stream)

    def new_pool(self, device):
        prev = self.torch.cuda._exchange_device(device)
        try:
            return self.torch.cuda.MemPool(self.alloc.allocator())
        finally:
            self.torch.cuda._maybe_exchange_device(prev)

    def route(self, device):
        """Every later allocation on `device` goes to a libumalloc pool (nothing if it already does)."""
        device = int(device)
        if device < 0:
            return
        with self.lock:
            if device in self.pools:
                return
            pool = self.new_pool(device)
            self._begin(device, pool.id)
            self.pools[device] = pool

    def _suspend(self, device):
        pool = self.pools.get(device)
        if pool is not None:
            self._end(device, pool.id)
            self._release(device, pool.id)  # each begin counts a use of the pool
        return pool

    def behind(self, device, fn, *a, **k):
        """Runs fn, which adds a routing of PyTorch's, with ours moved behind it."""
        device = self.torch.cuda.current_device() if device is None else int(device)
        with self.lock:
            pool = self._suspend(device)
            try:
                return fn(*a, **k)
            finally:
                if pool is not None:
                    self._begin(device, pool.id)

    def graph_pool(self, device):
        pool = self.new_pool(device)
        self.graph_pools.append(pool)
        return pool.id

    def empty_cache(self, original):
        retired = []
        with self.lock:
            for device in list(self.pools):
                retired.append(self._suspend(device))
                fresh = self.new_pool(device)
                self._begin(device, fresh.id)
                self.pools[device] = fresh
        # Dropping a MemPool drops its last use: PyTorch frees its free segments now, the rest as they are freed.
        del retired
        original()

    def outside(self) -> dict:
        """device -> bytes of PyTorch's segments that are in no libumalloc pool."""
        ours = {tuple(p.id) for p in list(self.pools.values()) + self.graph_pools}
        out = {}
        for seg in self.torch.cuda.memory_snapshot():
            if tuple(seg.get("segment_pool_id") or (0, 0)) not in ours:
                out[seg["device"]] = out.get(seg["device"], 0) + seg["total_size"]
        return out


def _every_stream(_stream):
    return True


def _behind_ours(r, fn):
    def begin(device, pool_id, *a, **k):
        return r.behind(device, fn, device, pool_id, *a, **k)
    begin.__name__ = getattr(fn, "__name__", "begin")
    begin.__doc__ = getattr(fn, "__doc__", None)
    begin.__wrapped__ = fn
    return begin


def install(torch, lib) -> Route:
    """Installs the route in this process; the first pool is made when CUDA starts (torch.cuda._lazy_call)."""
    r = Route(torch, lib)
    cuda = torch.cuda
    cuda._lazy_call(lambda: r.route(torch._C._cuda_getDevice()))

    # The program's routings (and PyTorch's own, made through these names) go ahead of ours.
    for name in ("_cuda_beginAllocateCurrentThreadToPool", "_cuda_beginAllocateToPool"):
        fn = getattr(torch._C, name, None)
        if fn is None:
            continue
        wrapped = _behind_ours(r, fn)
        setattr(torch._C, name, wrapped)
        if getattr(cuda.memory, name, None) is fn:
            setattr(cuda.memory, name, wrapped)

    graph_cls = cuda.graphs.CUDAGraph
    orig_capture = graph_cls.capture_begin

    def capture_begin(self, pool=None, *a, **k):
        dev = torch.cuda.current_device()
        if pool is None and dev in r.pools:
            pool = r.graph_pool(dev)
        return r.behind(dev, orig_capture, self, pool, *a, **k)

    graph_cls.capture_begin = capture_begin

    orig_handle = cuda.graph_pool_handle

    def graph_pool_handle():
        dev = torch.cuda.current_device()
        return r.graph_pool(dev) if dev in r.pools else orig_handle()

    cuda.graph_pool_handle = graph_pool_handle
    if getattr(cuda.graphs, "graph_pool_handle", None) is orig_handle:
        cuda.graphs.graph_pool_handle = graph_pool_handle

    orig_set = cuda.set_device

    def set_device(device):
        orig_set(device)
        if cuda.is_initialized():
            r.route(torch.cuda.current_device())

    cuda.set_device = set_device
    orig_enter = cuda.device.__enter__

    def enter(self):
        out = orig_enter(self)
        if cuda.is_initialized() and isinstance(getattr(self, "idx", None), int) and self.idx >= 0:
            r.route(self.idx)
        return out

    cuda.device.__enter__ = enter
    orig_empty = cuda.memory.empty_cache

    def empty_cache():
        return r.empty_cache(orig_empty) if cuda.is_initialized() else orig_empty()

    empty_cache.__doc__ = orig_empty.__doc__
    cuda.empty_cache = cuda.memory.empty_cache = empty_cache
    return r


def report_outside(r, out=None):
    out = out or sys.stderr
    try:
        outside = r.outside()
    except Exception:  # noqa: BLE001 - a report at exit never fails the program
        return
    for dev, nbytes in sorted(outside.items()):
        out.write(f"umscope place: {nbytes} B of PyTorch's memory on cuda:{dev} was not placed (a device the "
                  "program never made current with torch.cuda.set_device or torch.cuda.device, or a pool of the "
                  "program's own)\n")
