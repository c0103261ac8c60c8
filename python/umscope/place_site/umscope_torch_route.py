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

empty_cache: PyTorch synchronises and frees its default pools' free segments only while no routing is under
way, and a private pool's only once nothing uses it; so empty_cache() ends our routings, retires each device's
pool (PyTorch frees its free segments now, the others when their tensors are freed), empties PyTorch's caches
as without place, and routes each device to a fresh pool. A MemPool's destructor empties its pool with the same
synchronisation, which PyTorch refuses (aborts) while a routing is under way: the pools made here are never
destroyed, and a pool of the program's dropped while ours is routed is given one more use until the next
empty_cache (Route.pin). Blocks freed after use on another stream (record_stream) are reclaimed by PyTorch only
at an allocation made while no routing is under way: one is made after an optimizer step that follows a
Tensor.record_stream, and every FLUSH_EVERY steps (Route.flush; its 2 MiB segment of PyTorch's small pool is
device memory).

Devices: the current device is routed when CUDA starts in the program, another one when torch.cuda.set_device
or torch.cuda.device makes it current. Memory of a device the program never makes current stays PyTorch's
device memory; such memory is reported at exit (one line on stderr, report_outside)."""
import ctypes
import sys
import threading


FLUSH_EVERY = 32  # optimizer steps between reclaims when the program itself recorded no stream
ROUTE = None  # the Route install() put in this process (bench/overhead_ab.py times work with it routed and paused)


def _immortal(obj):
    """PyTorch's MemPool destructor empties the pool with a synchronisation that asserts no pool routing is
    under way, which ours always is: the pools made here are never destroyed (retired ones are released
    through _cuda_releasePool instead)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    return obj


class Route:
    def __init__(self, torch, lib):
        self.torch = torch
        self.alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "umscope_alloc", "umscope_free")
        C = torch._C
        self._begin_all, self._end, self._release = (C._cuda_beginAllocateToPool, C._cuda_endAllocateToPool,
                                                     C._cuda_releasePool)
        self.pools = {}         # device -> the MemPool every allocation on the device goes to
        self.graph_pools = []   # pools handed to graphs: kept for the process (graphs share pools by id)
        self.served = set()     # the id of every pool made here, retired ones too: libumalloc serves them all
        self.generator_graphs = {}  # device -> the graph holding its random generator's graph state (never freed)
        self.pinned = []        # (device, id) of the program's pools dropped while ours was routed
        self.lock = threading.RLock()
        self.form = None        # how this PyTorch's _cuda_beginAllocateToPool is called
        self.suspended = 0
        self.flush_error = None
        self.recorded = False   # the program called Tensor.record_stream since the last flush

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
            pool = _immortal(self.torch.cuda.MemPool(self.alloc.allocator()))
            self.served.add(tuple(pool.id))
            return pool
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
            if not self.suspended:
                self._begin(device, pool.id)
            self.pools[device] = pool

    def active(self) -> bool:
        return bool(self.pools) and not self.suspended

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
            pool = self._suspend(device) if not self.suspended else None
            try:
                return fn(*a, **k)
            finally:
                if pool is not None:
                    self._begin(device, pool.id)

    def pause(self):
        """Ends our routings until the matching resume() (pauses nest): allocations go PyTorch's own way."""
        with self.lock:
            if not self.suspended:
                for d in self.pools:
                    self._suspend(d)
            self.suspended += 1

    def resume(self):
        with self.lock:
            self.suspended -= 1
            if not self.suspended:
                for d, pool in self.pools.items():  # devices routed while paused too
                    self._begin(d, pool.id)

    def unrouted(self, fn, *a, **k):
        """Runs fn with none of our routings under way (PyTorch then synchronises and frees as without them),
        holding the route's lock: for short work that waits on no other thread of the program (an autograd
        thread making a device current routes it, which takes the lock). Longer work pauses and resumes."""
        with self.lock:
            self.pause()
            try:
                return fn(*a, **k)
            finally:
                self.resume()

    def graph_pool(self, device):
        pool = self.new_pool(device)
        self.graph_pools.append(pool)
        return pool.id

    def keep_generator_state(self, device):
        """A capture registers the device's random generator with its graph, and the first registration allocates
        the generator's graph state (two 8-byte tensors). The capture begins with our routing moved behind the
        graph's, so that state would come from PyTorch's own pool, unplaced (seen on the H100: 1024 B in pool
        (0, 0) at exit). It is registered here first, with ours routed, by a graph that is never destroyed, so it
        lives in a libumalloc pool for the process. A PyTorch without CUDAGraph.register_generator_state keeps
        its own way (the exit check then names the bytes)."""
        if device in self.generator_graphs:
            return
        self.generator_graphs[device] = None
        try:
            graph = self.torch.cuda.graphs.CUDAGraph()
            graph.register_generator_state(self.torch.cuda.default_generators[device])
            self.generator_graphs[device] = _immortal(graph)
        except Exception:  # noqa: BLE001 - never fail the program's capture over this
            pass

    def pin(self, device, pool_id):
        """A pool of the program's is being destroyed while ours is routed: its destructor's synchronisation
        would fail, so it is given one more use, released at the next empty_cache."""
        self._begin_all(device, pool_id)
        self._end(device, pool_id)
        self.pinned.append((device, pool_id))

    def empty_cache(self, original):
        """Retires each device's pool (PyTorch frees its free segments now, the others once their tensors are
        freed) and the pinned pools, empties PyTorch's caches with no routing under way, and routes each device
        to a fresh pool."""
        def empty():
            for device, pool in list(self.pools.items()):
                self._release(device, pool.id)  # the MemPool's own use: the pool becomes freeable
                self.pools[device] = self.new_pool(device)
            for device, pool_id in self.pinned:
                self._release(device, pool_id)
            self.pinned = []
            original()
        self.unrouted(empty)

    def flush(self):
        """PyTorch reclaims the blocks freed after use on other streams (record_stream) only at an allocation
        made while no routing is under way: one of a byte, on the current device and stream."""
        torch = self.torch
        if self.flush_error or not self.active() or torch.cuda.is_current_stream_capturing():
            return
        C = torch._C

        def alloc_free():
            ptr = C._cuda_cudaCachingAllocator_raw_alloc(1, torch.cuda.current_stream().cuda_stream)
            C._cuda_cudaCachingAllocator_raw_delete(ptr)
        try:
            self.unrouted(alloc_free)
        except Exception as e:  # noqa: BLE001 - never fail the program's optimizer step: say so once, stop
            self.flush_error = f"{type(e).__name__}: {e}"
            sys.stderr.write("umscope place: blocks freed after record_stream are not reclaimed during the run "
                             f"({self.flush_error})\n")

    def outside(self) -> dict:
        """device -> bytes allocated in PyTorch's segments that are in no libumalloc pool. A pool empty_cache
        retired is still ours: the tensors allocated before it stay in its segments (seen on the H100: every
        tensor made before an empty_cache was reported as not placed)."""
        out = {}
        for seg in self.torch.cuda.memory_snapshot():
            if tuple(seg.get("segment_pool_id") or (0, 0)) not in self.served and seg.get("allocated_size", 0):
                out[seg["device"]] = out.get(seg["device"], 0) + seg["allocated_size"]
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
    global ROUTE
    r = ROUTE = Route(torch, lib)
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
        if dev in r.pools:
            r.keep_generator_state(dev)
            if pool is None:
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
        return r.empty_cache(orig_empty) if cuda.is_initialized() and r.pools else orig_empty()

    empty_cache.__doc__ = orig_empty.__doc__
    cuda.empty_cache = cuda.memory.empty_cache = empty_cache

    # The program's MemPools: where made, and pinned if dropped while ours is routed (Route.pin).
    mp_cls = cuda.memory.MemPool
    orig_init = mp_cls.__init__
    orig_del = getattr(mp_cls, "__del__", None)

    def mp_init(self, *a, **k):
        orig_init(self, *a, **k)
        self._umscope_device = torch._C._cuda_getDevice()

    def mp_del(self):
        try:
            if r.active() and hasattr(self, "_umscope_device"):
                with r.lock:
                    r.pin(self._umscope_device, tuple(self.id))
        except Exception:  # noqa: BLE001 - a destructor never raises
            pass
        if orig_del is not None:
            orig_del(self)

    mp_cls.__init__, mp_cls.__del__ = mp_init, mp_del

    # Blocks freed after use on other streams are reclaimed after each optimizer step (Route.flush).
    # Each step after the program called Tensor.record_stream, and every FLUSH_EVERY steps (PyTorch's own
    # C++ code records streams too, NCCL's process group for one).
    orig_record = torch.Tensor.record_stream

    def record_stream(self, stream):
        r.recorded = True
        return orig_record(self, stream)

    record_stream.__doc__ = orig_record.__doc__
    torch.Tensor.record_stream = record_stream
    steps = [0]

    def after_step(*_):
        steps[0] += 1
        if r.recorded or steps[0] % FLUSH_EVERY == 0:
            r.recorded = False
            r.flush()

    optim = getattr(getattr(torch, "optim", None), "optimizer", None)
    if optim is not None and hasattr(optim, "register_optimizer_step_post_hook"):
        optim.register_optimizer_step_post_hook(after_step)
    return r


def report_outside(r, out=None):
    out = out or sys.stderr
    try:
        outside = r.outside()
    except Exception:  # noqa: BLE001 - a report at exit never fails the program
        return
    for dev, nbytes in sorted(outside.items()):
        out.write(f"umscope place: {nbytes} B of PyTorch's memory on cuda:{dev} in use at exit was not placed "
                  "(a device the program never made current with torch.cuda.set_device or torch.cuda.device, or a "
                  "pool of the program's own)\n")
