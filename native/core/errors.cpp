// UM_CUDA's failure path (errors.hpp): a CUDA error becomes an exception naming the call and the place.
#include "umscope/errors.hpp"

#ifdef UMSCOPE_HAVE_CUDA
#include <string>

namespace umscope {

[[noreturn]] void cuda_fail(cudaError_t err, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" +
                           cudaGetErrorString(err) + ") in " + what + " at " + file + ":" +
                           std::to_string(line));
}

}  // namespace umscope
#endif
