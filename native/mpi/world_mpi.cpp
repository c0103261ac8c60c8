// The MPI world of umbench-mpi: rank, size, ranks per host, CUDA-awareness,
// and the collectives of world.hpp over MPI_COMM_WORLD.
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include <cstring>
#include <string>
#include <vector>

#include "umscope/world.hpp"

namespace umscope {
namespace {

void bcast(void* buf, size_t bytes, int root) {
  MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
}
double vmax(double v) {
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}
long long vsum(long long v) {
  long long out = v;
  MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}
std::vector<std::string> gather(const std::string& mine) {
  int n = static_cast<int>(mine.size()), size = world().size, rank = world().rank;
  std::vector<int> lens(size), offs(size);
  MPI_Gather(&n, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<char> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) offs[r] = total, total += lens[r];
    all.resize(total + 1);
  }
  MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r) out.emplace_back(all.data() + offs[r], lens[r]);
  return out;
}
void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

// CUDA-awareness: asked at run time where the MPI offers a query, else its
// compile-time macro, else unknown (treated as not CUDA-aware).
void cuda_awareness(World& w) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  w.cuda_aware = MPIX_Query_cuda_support() == 1;
  w.cuda_aware_why = w.cuda_aware ? "MPIX_Query_cuda_support() = 1"
                                  : "MPIX_Query_cuda_support() = 0: this MPI was built with CUDA support, "
                                    "but it is not enabled at run time";
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  w.cuda_aware = false;
  w.cuda_aware_why = "the MPI library is not CUDA-aware (Open MPI built without CUDA: MPIX_CUDA_AWARE_SUPPORT = 0)";
#elif defined(MPIX_GPU_SUPPORT_CUDA)
  int yes = 0;
  MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes);
  w.cuda_aware = yes != 0;
  w.cuda_aware_why = std::string("MPIX_GPU_query_support(CUDA) = ") + (yes ? "1" : "0");
#else
  w.cuda_aware = false;
  w.cuda_aware_why = "this MPI offers no way to ask whether it is CUDA-aware (no MPIX_Query_cuda_support): "
                     "device memory is not passed to it";
#endif
}

}  // namespace

void mpi_world_init(int* argc, char*** argv) {
  // MPI_Init, as OSU's and nccl-tests' ranks start: only the main thread calls MPI, and Open MPI 4.1 takes its
  // internal locks on every call once a thread level above MPI_THREAD_SINGLE is asked for (MPI_THREAD_FUNNELED
  // cost 25% of osu_bw's 8-byte message rate and 40% on osu_latency's 8-byte round trip on a 2-core host).
  MPI_Init(argc, argv);
  World& w = world();
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  w.thread_level = provided == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
                   : provided == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
                   : provided == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                                                       : "MPI_THREAD_MULTIPLE";
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &w.local_rank);
  MPI_Comm_size(local, &w.local_size);
  MPI_Comm_free(&local);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(lib, &len);
  w.library = std::string(lib, strnlen(lib, sizeof lib));
  auto nl = w.library.find('\n');
  if (nl != std::string::npos) w.library.resize(nl);
  while (!w.library.empty() && (w.library.back() == ',' || w.library.back() == ' ')) w.library.pop_back();
  w.runtime = "mpi";
  w.bcast = bcast;
  w.max = vmax;
  w.sum = vsum;
  w.gather = gather;
  w.barrier = barrier;
  cuda_awareness(w);
}

void mpi_world_finalize() { MPI_Finalize(); }

}  // namespace umscope
