// The ranks a case runs on. umbench is one rank (a world of one); umbench-mpi,
// started by the site's launcher (mpirun, srun, flux), is one rank of an MPI
// world. Benchmarks that span ranks (nccl, mpi) use the few collectives here;
// every other benchmark ignores the world. Only rank 0 prints records, so the
// store has one writer whatever the launcher started.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace umscope {

struct World {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks on this host
  std::string runtime = "none";        // "mpi" in umbench-mpi
  std::string library;                 // MPI library version line
  std::string thread_level;            // what MPI_Query_thread says (MPI_THREAD_SINGLE: MPI_Init, as OSU and nccl-tests)
  std::string host;
  std::string rank_placement;          // how umbench-mpi placed this rank (placement.hpp: plan_rank)
  // Whether the MPI accepts GPU (device) pointers; "no"/"unknown" give why.
  bool cuda_aware = false;
  std::string cuda_aware_why;
  // Collectives; with size 1 they return their input.
  void (*bcast)(void* buf, size_t bytes, int root) = nullptr;
  double (*max)(double v) = nullptr;
  long long (*sum)(long long v) = nullptr;
  std::vector<std::string> (*gather)(const std::string& mine) = nullptr;  // rank 0 gets all, others {}
  void (*barrier)() = nullptr;
};

World& world();

// Every rank calls this with "" (can go on) or the reason it cannot; if any
// rank has a reason, every rank throws Skip with the lowest such rank's.
void world_agree(const std::string& why_not);
double world_max(double v);
long long world_sum(long long v);
void world_bcast(void* buf, size_t bytes, int root);
void world_barrier();

}  // namespace umscope
