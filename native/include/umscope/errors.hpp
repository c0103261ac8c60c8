// Outcomes a case can have besides success. A Skip is not an error: the
// machine cannot serve the case and says why. A Refused case was stopped by a
// safety guard. Anything else thrown is a failure of the case.
#pragma once
#include <stdexcept>
#include <string>

namespace umscope {

struct Skip : std::runtime_error {
  explicit Skip(const std::string& why) : std::runtime_error(why) {}
};

struct Refused : std::runtime_error {
  explicit Refused(const std::string& why) : std::runtime_error(why) {}
};

struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& why) : std::runtime_error(why) {}
};

struct VerifyError : std::runtime_error {
  explicit VerifyError(const std::string& why) : std::runtime_error(why) {}
};

}  // namespace umscope

#ifdef UMSCOPE_HAVE_CUDA
#include <cuda_runtime.h>
namespace umscope {
[[noreturn]] void cuda_fail(cudaError_t err, const char* what, const char* file, int line);
}
#define UM_CUDA(call)                                                   \
  do {                                                                  \
    cudaError_t um_err_ = (call);                                       \
    if (um_err_ != cudaSuccess) ::umscope::cuda_fail(um_err_, #call, __FILE__, __LINE__); \
  } while (0)
#endif
