// The training stream of a CUDA device, for the cudart-only translation units
// (step_timer_cuda.cpp, device_staging_cuda.cpp): Torch's current stream on `device` where
// c10_cuda is available (SCALEGUARD_WITH_C10_CUDA, a CUDA LibTorch), else the legacy default
// stream, which Torch uses unless told otherwise. Without c10_cuda these files still compile
// against a CPU LibTorch (the compile check, target scaleguard_comm_nccl_check).
#pragma once
#include <cuda_runtime.h>

#ifdef SCALEGUARD_WITH_C10_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace scaleguard::run {

inline cudaStream_t cuda_training_stream(int device) {
#ifdef SCALEGUARD_WITH_C10_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  (void)device;
  return nullptr;
#endif
}

}  // namespace scaleguard::run
