// The exit codes of every swept program, documented in docs/exit-codes.md.
// Scripts and the agent rely on them: change both together.
#pragma once

namespace swept {

enum ExitCode : int {
  kExitOk = 0,            // success
  kExitFailure = 1,       // the run failed for a reason outside the input (I/O, peer gone)
  kExitUsage = 2,         // bad input: flags, sweep file, config, data files
  kExitDiverged = 3,      // swept-train: loss became NaN or infinite
  kExitNoDevice = 4,      // swept-train: the device asked for is missing (no GPU, no CUDA build)
  kExitOutOfMemory = 5,   // swept-train: the memory budget (gpu_memory_fraction) is too small
  kExitUnavailable = 6,   // CLI: the scheduler could not be reached
  kExitNotAllCompleted = 7,  // `swept wait`/`swept run`: the sweep ended with trials not completed
  kExitMissingLibrary = 8,   // swept-train: cuBLAS, cuDNN or NCCL cannot be loaded for --device=cuda
  kExitInterrupted = 130, // stopped by SIGINT/SIGTERM after cleaning up
  kExitInternal = 70,     // a bug in swept (EX_SOFTWARE)
};

}  // namespace swept
