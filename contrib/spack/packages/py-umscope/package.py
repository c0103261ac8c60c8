# A Spack recipe for umscope. Drop contrib/spack into a site repository, or use it directly:
#   spack repo add contrib/spack        (contrib/spack/repo.yaml names the namespace "umscope")
#   spack install py-umscope +cuda cuda_arch=90 +mpi +nccl
from spack.package import *


class PyUmscope(PythonPackage, CudaPackage):
    """umscope measures, traces and models CPU<->GPU data movement under every CUDA memory kind
    (explicit copies, managed, system-allocated via HMM/ATS, pinned, registered, NUMA placement)."""

    homepage = "https://github.com/umscope/umscope"
    git = "https://github.com/umscope/umscope.git"

    maintainers("umscope")
    license("Apache-2.0")

    version("main", branch="main")

    variant("mpi", default=False, description="Build umbench-mpi, the runner of the mpi family (one rank per GPU)")
    variant("nccl", default=False, description="Make NCCL available to the nccl family (dlopen'ed at run time)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("python@3.9:", type=("build", "run"))
    depends_on("py-scikit-build-core@0.11:", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("ninja", type="build")
    depends_on("py-pyyaml", type=("build", "run"))
    # nvcc, cudart, CCCL, CUPTI (the tracer links it) and cuBLAS (gemm dlopens it) all come with the toolkit.
    depends_on("cuda@13:", when="+cuda")
    depends_on("mpi", when="+mpi")
    depends_on("nccl", when="+nccl")
    depends_on("py-nvidia-ml-py", type="run", when="+cuda")

    conflicts("+nccl", when="~cuda", msg="the nccl family measures GPU collectives")
    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU architecture, e.g. cuda_arch=90 (Hopper)")

    def config_settings(self, spec, prefix):
        """scikit-build-core settings: CUDA required (or off), the architectures, the toolkit's nvcc."""
        defs = {"cmake.define.UMSCOPE_CUDA": "ON" if spec.satisfies("+cuda") else "OFF",
                "cmake.define.UMSCOPE_MPI": "ON" if spec.satisfies("+mpi") else "OFF",
                # Spack builds in its own stage: no build directory persists between installs.
                "build-dir": ""}
        if spec.satisfies("+cuda"):
            archs = spec.variants["cuda_arch"].value
            defs["cmake.define.CMAKE_CUDA_ARCHITECTURES"] = ";".join(f"{a}-real" for a in archs)
            defs["cmake.define.CMAKE_CUDA_COMPILER"] = join_path(spec["cuda"].prefix.bin, "nvcc")
        return defs

    def setup_build_environment(self, env):
        if self.spec.satisfies("+cuda"):
            env.set("CUDACXX", join_path(self.spec["cuda"].prefix.bin, "nvcc"))
            env.set("CUDA_HOME", self.spec["cuda"].prefix)

    def setup_run_environment(self, env):
        if self.spec.satisfies("+cuda"):
            # cuBLAS and CUPTI are found through CUDA_HOME and the loader path.
            env.set("CUDA_HOME", self.spec["cuda"].prefix)
            env.prepend_path("LD_LIBRARY_PATH", self.spec["cuda"].prefix.lib64)
        if self.spec.satisfies("+nccl"):
            env.prepend_path("LD_LIBRARY_PATH", self.spec["nccl"].prefix.lib)
