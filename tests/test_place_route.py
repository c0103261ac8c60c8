"""umscope place's route into PyTorch (place_site/umscope_torch_route.py) against a stand-in for the torch API
it uses: the order of PyTorch's pool routings (the first that claims an allocation wins), the use counts it
keeps balanced, the pools graphs get, empty_cache's fresh pool and the devices routed. The real PyTorch runs
it in bench/place_probe.py and bench/place_compat.py (GPU)."""
import itertools
import sys
import types

import pytest

from umscope import place

sys.path.insert(0, str(place.SITE))
import umscope_torch_route as route  # noqa: E402


class FakeTorch:
    """The allocator's routing list and pools as PyTorch keeps them (CUDACachingAllocator's captures_underway
    and use counts), behind the Python names the route calls."""

    def __init__(self):
        self.routings = []       # (how, device, pool id) in PyTorch's order
        self.use = {}            # pool id -> use count
        self.allocator_of = {}   # pool id -> allocator
        self.current = 0
        self.initialized = False
        self.queued = []
        self.emptied = 0
        self.emptied_with, self.aborted, self.raw = [], [], []
        self.capturing = False
        self.generator_state, self.generator_graphs = [], {}  # (generator, routings when its state was made)
        ids = itertools.count(1)
        fake = self

        def begin_all(device, pool_id, *filt):
            assert not filt, "this PyTorch's form takes (device, pool)"
            fake._begin("all", device, pool_id)

        def begin_thread(device, pool_id):
            fake._begin("thread", device, pool_id)

        def end(device, pool_id):
            fake.routings = [r for r in fake.routings if r[2] != pool_id]

        def release(device, pool_id):
            fake.use[pool_id] -= 1

        class MemPool:
            def __init__(self, allocator=None):
                self.id = (0, next(ids))
                fake.use[self.id] = 1
                fake.allocator_of[self.id] = allocator
                self.device = fake.current

            def __del__(self):
                # ~MemPool: releasePool, then emptyCache(id), whose synchronisation PyTorch asserts runs with no
                # routing under way once the pool is freeable
                fake.use[self.id] -= 1
                if fake.use[self.id] == 0 and fake.routings:
                    fake.aborted.append(self.id)

        class Allocator:
            def __init__(self, lib, a, f):
                self.lib = lib

            def allocator(self):
                return ("umalloc", self.lib)

        class CUDAGraph:
            def register_generator_state(self, generator):
                # CUDAGeneratorState::register_graph: the first graph registered allocates the state's two
                # tensors, on the current device, from whatever pool routing is first then
                if not fake.generator_graphs.get(generator):
                    fake.generator_state.append((generator, list(fake.routings)))
                fake.generator_graphs.setdefault(generator, []).append(self)

            def capture_begin(self, pool=None, capture_error_mode="global"):
                self.register_generator_state(fake.current)  # the device's default generator, as C++ does
                pool = pool or (next(ids), 0)
                fake.use[pool] = fake.use.get(pool, 0) + 1
                fake.routings.append(("graph", fake.current, pool))
                self.pool = pool

        class device:
            def __init__(self, idx):
                self.idx = idx

            def __enter__(self):
                self.prev = fake.current
                fake.current = self.idx

            def __exit__(self, *a):
                fake.current = self.prev

        def exchange(d):
            prev, fake.current = fake.current, d
            return prev

        def empty_cache():
            fake.emptied += 1
            fake.emptied_with.append(list(fake.routings))

        def raw_alloc(size, stream):
            fake.raw.append((size, stream, list(fake.routings)))
            return 1234

        def raw_delete(ptr):
            fake.raw.append(("free", ptr))

        C = types.SimpleNamespace(_cuda_beginAllocateToPool=begin_all,
                                  _cuda_beginAllocateCurrentThreadToPool=begin_thread,
                                  _cuda_endAllocateToPool=end, _cuda_releasePool=release,
                                  _cuda_getDevice=lambda: fake.current,
                                  _cuda_cudaCachingAllocator_raw_alloc=raw_alloc,
                                  _cuda_cudaCachingAllocator_raw_delete=raw_delete)
        memory = types.SimpleNamespace(CUDAPluggableAllocator=Allocator, empty_cache=empty_cache,
                                       _cuda_beginAllocateCurrentThreadToPool=begin_thread, MemPool=MemPool)
        graphs = types.SimpleNamespace(CUDAGraph=CUDAGraph, graph_pool_handle=lambda: (next(ids), 0))
        self.cuda = types.SimpleNamespace(
            memory=memory, graphs=graphs, MemPool=MemPool, device=device, empty_cache=empty_cache,
            graph_pool_handle=graphs.graph_pool_handle, _lazy_call=self.queued.append,
            is_initialized=lambda: fake.initialized, current_device=lambda: fake.current,
            set_device=lambda d: setattr(fake, "current", d), _exchange_device=exchange,
            _maybe_exchange_device=exchange, memory_snapshot=lambda: [],
            is_current_stream_capturing=lambda: fake.capturing, default_generators=[0, 1, 2, 3],
            current_stream=lambda: types.SimpleNamespace(cuda_stream=77))
        self._C = C

        class Tensor:
            def record_stream(self, stream):
                fake.recorded_streams.append(stream)

        class Optimizer:
            hooks = []

            @staticmethod
            def register_optimizer_step_post_hook(hook):
                Optimizer.hooks.append(hook)

        self.Tensor = Tensor
        self.recorded_streams = []
        self.optim = types.SimpleNamespace(optimizer=Optimizer)

    def _begin(self, how, device, pool_id):
        assert all(r[2] != pool_id for r in self.routings), "already recording to this pool"
        self.use[pool_id] = self.use.get(pool_id, 0) + 1
        self.routings.append((how, device, pool_id))

    def init(self):
        self.initialized = True
        for fn in self.queued:
            fn()


@pytest.fixture
def t():
    return FakeTorch()


def started(t):
    r = route.install(t, "/lib/libumalloc.so")
    assert t.routings == [] and len(t.queued) == 1  # nothing before CUDA starts in the program
    t.init()
    return r


def ours(r, t, device=0):
    return tuple(r.pools[device].id)


def test_cuda_start_routes_the_current_device_to_a_libumalloc_pool_for_every_stream_and_thread(t):
    r = started(t)
    assert t.routings == [("all", 0, ours(r, t))] and r.form == "device"
    assert t.allocator_of[ours(r, t)] == ("umalloc", "/lib/libumalloc.so")
    assert t.use[ours(r, t)] == 2  # the MemPool's own use and the routing's


def test_a_graph_capture_goes_ahead_of_ours_in_a_libumalloc_pool_of_its_own(t):
    r = started(t)
    g = t.cuda.graphs.CUDAGraph()
    g.capture_begin()
    assert [how for how, _, _ in t.routings] == ["graph", "all"]
    assert g.pool != ours(r, t) and t.allocator_of[g.pool] == ("umalloc", "/lib/libumalloc.so")
    assert t.use[ours(r, t)] == 2  # ended, released and begun again: balanced
    t._C._cuda_endAllocateToPool(0, g.pool)  # capture_end
    assert t.routings == [("all", 0, ours(r, t))]


def test_the_random_generators_graph_state_is_made_in_our_pool_before_the_capture_moves_ours_behind(t):
    """The first capture on a device makes its generator's graph state; made inside the capture it came from
    PyTorch's own pool (the H100 run: 1024 B not placed). It is made first, with ours routed, once per device."""
    r = started(t)
    for _ in range(2):
        g = t.cuda.graphs.CUDAGraph()
        g.capture_begin()
        t._C._cuda_endAllocateToPool(0, g.pool)
    assert t.generator_state == [(0, [("all", 0, ours(r, t))])]
    assert len(r.generator_graphs) == 1 and r.generator_graphs[0] is not None


def test_a_graph_given_a_pool_keeps_it(t):
    r = started(t)
    handle = t.cuda.graph_pool_handle()  # served by libumalloc too
    assert t.allocator_of[handle] == ("umalloc", "/lib/libumalloc.so")
    g = t.cuda.graphs.CUDAGraph()
    g.capture_begin(handle)
    assert g.pool == handle and t.routings[0] == ("graph", 0, handle) and t.routings[1][2] == ours(r, t)


def test_the_programs_own_routings_go_ahead_of_ours(t):
    r = started(t)
    user = t.cuda.MemPool()
    t.cuda.memory._cuda_beginAllocateCurrentThreadToPool(0, user.id)  # what torch.cuda.use_mem_pool calls
    assert t.routings == [("thread", 0, user.id), ("all", 0, ours(r, t))]
    t._C._cuda_endAllocateToPool(0, user.id)
    other = t.cuda.MemPool()
    t._C._cuda_beginAllocateToPool(0, other.id)  # a device-wide routing of the program's
    assert t.routings == [("all", 0, other.id), ("all", 0, ours(r, t))]
    assert t.use[ours(r, t)] == 2


def test_set_device_and_device_context_route_the_device_they_make_current(t):
    r = started(t)
    t.cuda.set_device(1)
    with t.cuda.device(2):
        pass
    assert sorted(r.pools) == [0, 1, 2]
    assert [(d, p) for _, d, p in t.routings] == [(d, ours(r, t, d)) for d in (0, 1, 2)]
    t.cuda.set_device(1)  # routed once
    assert len(t.routings) == 3


def test_empty_cache_retires_the_pool_empties_pytorchs_caches_unrouted_and_routes_to_a_fresh_one(t):
    r = started(t)
    old = ours(r, t)
    t.cuda.empty_cache()
    assert t.emptied == 1 and t.emptied_with == [[]]  # PyTorch synchronises and frees only with no routing
    assert ours(r, t) != old and t.use[old] == 0  # freeable: PyTorch frees its segments as they come free
    assert t.routings == [("all", 0, ours(r, t))] and t.use[ours(r, t)] == 2
    assert t.cuda.memory.empty_cache is t.cuda.empty_cache
    assert not t.aborted


def test_a_program_pool_dropped_while_ours_is_routed_is_kept_until_empty_cache(t):
    r = started(t)
    user = t.cuda.MemPool()
    uid = user.id
    del user  # its destructor would synchronise with our routing under way: PyTorch aborts
    assert not t.aborted and t.use[uid] == 1 and r.pinned == [(0, uid)]
    t.cuda.empty_cache()
    assert t.use[uid] == 0 and r.pinned == [] and not t.aborted


def test_the_pools_made_here_are_never_destroyed(t):
    r = started(t)
    import gc
    pool = r.pools[0]
    assert sys.getrefcount(pool) > 3  # held beyond the Route's dict
    t.cuda.empty_cache()
    del pool
    gc.collect()
    assert not t.aborted


def test_flush_allocates_once_unrouted_after_an_optimizer_step_but_not_while_capturing(t):
    r = started(t)
    r.flush()
    assert t.raw == [(1, 77, []), ("free", 1234)] and t.routings == [("all", 0, ours(r, t))]
    t.capturing = True
    r.flush()
    assert len(t.raw) == 2


def test_the_installed_route_is_the_modules_and_unrouted_work_runs_with_no_routing_of_ours(t):
    """bench/overhead_ab.py times the program's work routed and paused in one process through ROUTE."""
    r = started(t)
    assert route.ROUTE is r
    seen = r.unrouted(lambda: list(t.routings))
    assert seen == [] and t.routings == [("all", 0, ours(r, t))] and t.use[ours(r, t)] == 2
    r.pause()
    r.pause()  # pauses nest
    assert t.routings == [] and t.use[ours(r, t)] == 1 and not r.active()
    r.resume()
    assert t.routings == []
    r.resume()
    assert t.routings == [("all", 0, ours(r, t))] and t.use[ours(r, t)] == 2 and r.active()


def test_a_paused_route_lets_another_thread_route_while_the_work_waits_for_it(t):
    """Training under a paused route: autograd's device thread enters torch.cuda.device (gradient checkpointing
    restores the random state there), which routes the device and takes the route's lock, while the main thread
    waits for the backward. Paused, the lock is free; a device routed meanwhile is routed at resume."""
    import threading
    r = started(t)
    done = []

    def backward():
        r.route(1)  # what the device context's __enter__ does
        done.append(True)

    r.pause()
    try:
        th = threading.Thread(target=backward)
        th.start()
        th.join(5)
        assert done == [True], "the other thread waited for the route's lock"
        assert t.routings == []  # routed while paused: not begun yet
    finally:
        r.resume()
    assert sorted(t.routings) == [("all", 0, ours(r, t)), ("all", 1, ours(r, t, 1))]


def test_before_cuda_starts_empty_cache_is_pytorchs_own(t):
    route.install(t, "/lib/libumalloc.so")
    t.cuda.empty_cache()
    assert t.emptied == 1 and t.routings == []


def test_memory_outside_every_libumalloc_pool_is_reported(t, capsys):
    r = started(t)
    t.cuda.memory_snapshot = lambda: [
        {"device": 0, "total_size": 2 << 20, "allocated_size": 1 << 20, "segment_pool_id": ours(r, t)},
        {"device": 1, "total_size": 20 << 20, "allocated_size": 20 << 20, "segment_pool_id": (0, 0)},
        {"device": 1, "total_size": 2 << 20, "allocated_size": 2 << 20, "segment_pool_id": (0, 0)},
        {"device": 0, "total_size": 2 << 20, "allocated_size": 0, "segment_pool_id": (0, 0)}]  # flush's, free
    route.report_outside(r)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["umscope place: 23068672 B of PyTorch's memory on cuda:1 in use at exit was not placed (a device the program "
                   "never made current with torch.cuda.set_device or torch.cuda.device, or a pool of the program's "
                   "own)"]


def test_tensors_left_in_a_pool_that_empty_cache_retired_are_placed(t, capsys):
    """empty_cache routes to a fresh pool; what was allocated before stays in the retired one's segments, which
    libumalloc served: not reported as unplaced (the H100 run of test_place's graph program reported them)."""
    r = started(t)
    old = ours(r, t)
    graph_pool = t.cuda.graph_pool_handle()
    t.cuda.empty_cache()
    assert ours(r, t) != old
    t.cuda.memory_snapshot = lambda: [
        {"device": 0, "total_size": 4 << 20, "allocated_size": 3 << 20, "segment_pool_id": old},
        {"device": 0, "total_size": 2 << 20, "allocated_size": 1 << 20, "segment_pool_id": ours(r, t)},
        {"device": 0, "total_size": 2 << 20, "allocated_size": 1 << 20, "segment_pool_id": graph_pool},
        {"device": 0, "total_size": 2 << 20, "allocated_size": 5, "segment_pool_id": (0, 0)}]
    route.report_outside(r)
    assert capsys.readouterr().err.strip().splitlines() == [
        "umscope place: 5 B of PyTorch's memory on cuda:0 in use at exit was not placed (a device the program "
        "never made current with torch.cuda.set_device or torch.cuda.device, or a pool of the program's own)"]


def test_a_reclaim_follows_the_optimizer_step_after_a_record_stream_and_every_32nd_step(t):
    r = started(t)
    step = t.optim.optimizer.hooks[-1]
    step(None, (), {})
    assert t.raw == []  # no stream recorded: no reclaim yet
    t.Tensor().record_stream(5)
    assert t.recorded_streams == [5]  # PyTorch's own record_stream still runs
    step(None, (), {})
    assert len(t.raw) == 2 and t.routings == [("all", 0, ours(r, t))]
    for _ in range(30):
        step(None, (), {})
    assert len(t.raw) == 4  # the 32nd step
