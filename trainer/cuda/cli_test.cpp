// swept-train built with the CUDA backend, as a real process, where no GPU can
// be used: these run (and must pass) on every machine, GPU or not, because
// each hides the GPUs with CUDA_VISIBLE_DEVICES="" (and on a machine without a
// driver there is none to hide).
#include <doctest/doctest.h>

#include "trainer/cuda/gpu_test_support.h"

namespace swept::cuda {
namespace {

using namespace testing;

TEST_CASE("trainer/cuda: swept-train --version says the CUDA backend is built") {
  auto dir = scratch_dir("version");
  ProcessResult r = run_process(swept_train() + " --version", dir);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("cuda") != std::string::npos);
#if defined(SWEPT_CUDA_EMULATED)
  CHECK(r.out.find("CUDA (emulated)") != std::string::npos);
#else
  // The runtime is static: the driver it needs must be stated (CUDA 13: 580).
  CHECK(r.out.find("needs NVIDIA driver") != std::string::npos);
#endif
}

TEST_CASE("trainer/cuda: swept-train --device=cuda with no GPU visible exits 4 and says what to do") {
  auto dir = scratch_dir("no_gpu");
  write_idx_folder(dir / "data", synthetic_mnist(200, 50));
  for (const char* device : {"cuda", "cuda:0", "cuda:3"}) {
    CAPTURE(device);
    ProcessResult r = run_process("CUDA_VISIBLE_DEVICES= " + swept_train() + " --device=" + device +
                                      " --max_steps=2 --batch_size=10 --data=" + (dir / "data").string(),
                                  dir);
    CHECK(r.exit_code == 4);
    CHECK(r.err.find("no CUDA GPU") != std::string::npos);
    CHECK(r.err.find("--device=cpu") != std::string::npos);
    CHECK(r.out.find("\"final\"") == std::string::npos);  // no metrics from a run that never started
  }
  // With replicas too: the device check comes first.
  ProcessResult r = run_process("CUDA_VISIBLE_DEVICES= " + swept_train() +
                                    " --device=cuda --replicas=2 --max_steps=2 --batch_size=10 --data=" +
                                    (dir / "data").string(),
                                dir);
  CHECK(r.exit_code == 4);
}

TEST_CASE("trainer/cuda: swept-train refuses a GPU memory fraction not above 0 and at most 1, with exit 2") {
  auto dir = scratch_dir("bad_fraction");
  write_idx_folder(dir / "data", synthetic_mnist(200, 50));
  const std::string data = " --data=" + (dir / "data").string();
  for (const char* flag : {"--gpu_memory_fraction=0", "--gpu_memory_fraction=1.5",
                           "--gpu_memory_fraction=-0.2", "--gpu_memory_fraction=abc"}) {
    CAPTURE(flag);
    ProcessResult r = run_process(swept_train() + " --device=cuda " + flag + data, dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("gpu_memory_fraction") != std::string::npos);
  }
  for (const char* env : {"0", "2", "x"}) {
    CAPTURE(env);
    ProcessResult r = run_process(std::string("SWEPT_GPU_MEMORY_FRACTION=") + env + " " + swept_train() +
                                      " --device=cuda" + data,
                                  dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("SWEPT_GPU_MEMORY_FRACTION") != std::string::npos);
  }
}

TEST_CASE("trainer/cuda: a CUDA build still trains on the CPU where no GPU is visible") {
  auto dir = scratch_dir("cpu_path");
  write_idx_folder(dir / "data", synthetic_mnist(200, 50));
  ProcessResult r = run_process("CUDA_VISIBLE_DEVICES= " + swept_train() +
                                    " --device=cpu --max_steps=3 --batch_size=10 --val_fraction=0 --data=" +
                                    (dir / "data").string(),
                                dir);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"final\":true") != std::string::npos);
}

}  // namespace
}  // namespace swept::cuda
