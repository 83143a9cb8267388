#include "bench/nccl_bench/rank.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/nccl_bench/pipes.h"
#include "bench/spin_kernel.h"
#include "kernels/exec/nccl/nccl_types.h"
#include "kernels/reduce/exact_data.h"

#define STRAGGLAR_RETURN_IF_ERROR(expr)                               \
  do {                                                                \
    if (absl::Status status_ = (expr); !status_.ok()) return status_; \
  } while (0)

namespace stragglar::nccl_bench {
namespace {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": CUDA error ", static_cast<int>(error), " (",
                                          cudaGetErrorName(error),
                                          "): ", cudaGetErrorString(error)));
}

absl::Status NcclStatus(ncclResult_t result, absl::string_view what, ncclComm_t comm) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(comm);
  return absl::InternalError(absl::StrCat(
      what, ": NCCL error ", static_cast<int>(result), " (", ncclGetErrorString(result), ")",
      last != nullptr && *last != '\0' ? ": " : "", last != nullptr ? last : ""));
}

struct PlacementResult {
  double time_us = 0;
  int64_t wrong = 0;
  std::vector<double> call_us;  // with --delay_us: each timed call's duration on this rank
};

class Rank {
 public:
  Rank(const Config& config, int rank, int device, int ctrl_fd, int result_fd)
      : config_(config), rank_(rank), device_(device), ctrl_fd_(ctrl_fd), result_fd_(result_fd) {}

  ~Rank() {
    for (cudaEvent_t event : call_events_) cudaEventDestroy(event);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (send_ != nullptr) cudaFree(send_);
    if (recv_ != nullptr) cudaFree(recv_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  int Main() {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
      SendLine(result_fd_,
               absl::StrCat("SKIP cudaGetDeviceCount: ",
                            error != cudaSuccess ? cudaGetErrorString(error) : "found 0 devices"));
      return 77;
    }
    if (absl::Status status = Run(count); !status.ok()) {
      SendLine(result_fd_, absl::StrCat("ERROR ", status.message()));
      // No cleanup: with a peer gone, ncclCommDestroy could wait forever. The parent ends the
      // other ranks.
      std::cerr.flush();
      _exit(1);
    }
    SendLine(result_fd_, "DONE");
    return 0;
  }

 private:
  absl::Status Run(int device_count) {
    STRAGGLAR_RETURN_IF_ERROR(JoinCommunicator(device_count));
    STRAGGLAR_RETURN_IF_ERROR(Allocate());
    STRAGGLAR_RETURN_IF_ERROR(RunRows());
    STRAGGLAR_RETURN_IF_ERROR(NcclStatus(ncclCommDestroy(comm_), "ncclCommDestroy", nullptr));
    comm_ = nullptr;
    return absl::OkStatus();
  }

  // Rank 0 makes the id and sends it to the parent, which hands it to the other ranks.
  absl::StatusOr<ncclUniqueId> UniqueId() {
    ncclUniqueId id;
    if (rank_ == 0) {
      STRAGGLAR_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr));
      SendLine(result_fd_, absl::StrCat("ID ", Hex(&id, sizeof(id))));
      return id;
    }
    std::optional<std::string> line = ReadLine(ctrl_fd_);
    if (!line.has_value() || !absl::StartsWith(*line, "ID ") ||
        !Unhex(absl::string_view(*line).substr(3), &id, sizeof(id))) {
      return absl::UnavailableError("no NCCL unique id from the parent");
    }
    return id;
  }

  // Sets up the device and its stream, joins the communicator and says HELLO.
  absl::Status JoinCommunicator(int device_count) {
    absl::StatusOr<ncclUniqueId> id = UniqueId();
    if (!id.ok()) return id.status();
    if (device_ >= device_count) {
      return absl::FailedPreconditionError(
          absl::StrCat("device ", device_, " does not exist (", device_count, " devices)"));
    }
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    cudaDeviceProp prop{};
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties"));
    char bus[64] = "?";
    cudaDeviceGetPCIBusId(bus, sizeof(bus), device_);
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    STRAGGLAR_RETURN_IF_ERROR(NcclStatus(ncclCommInitRank(&comm_, config_.ranks, *id, rank_),
                                         "ncclCommInitRank", nullptr));
    char host[256] = "?";
    gethostname(host, sizeof(host) - 1);
    SendLine(result_fd_,
             absl::StrCat("HELLO ", getpid(), " ", host, " ", device_, " ", bus, " ", prop.name));
    return absl::OkStatus();
  }

  // Plain device memory, the largest size for every row (in place uses recv_); the events; and
  // with -c 1 the host buffers of the check.
  absl::Status Allocate() {
    const size_t bytes = static_cast<size_t>(config_.max_bytes);
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&send_, bytes), "cudaMalloc"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&recv_, bytes), "cudaMalloc"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMemset(send_, 0, bytes), "cudaMemset"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMemset(recv_, 0, bytes), "cudaMemset"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate"));
    if (config_.delayed()) {
      call_events_.resize(2 * config_.iters);
      for (cudaEvent_t& event : call_events_) {
        STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&event), "cudaEventCreate"));
      }
    }
    if (config_.check) {
      input_.resize(bytes);
      expected_.resize(bytes);
      scratch_.resize(bytes);
    }
    return absl::OkStatus();
  }

  // Every row, out of place then in place, each reported to the parent as one ROW line.
  absl::Status RunRows() {
    const std::vector<RowSpec> rows = RowSpecs(config_);
    for (size_t index = 0; index < rows.size(); ++index) {
      const RowSpec& row = rows[index];
      if (config_.check) PrepareCheck(index, row);
      for (const bool in_place : {false, true}) {
        absl::StatusOr<PlacementResult> result = RunPlacement(row, in_place);
        if (!result.ok()) {
          return absl::Status(result.status().code(),
                              absl::StrCat(TypeName(row.type), " ", ReduceOpName(row.op), " ",
                                           row.bytes, " B ", in_place ? "in place" : "out of place",
                                           ": ", result.status().message()));
        }
        std::string line = absl::StrFormat("ROW %d %d %.4f %d %d", index, in_place ? 1 : 0,
                                           result->time_us, result->wrong, result->call_us.size());
        for (double call : result->call_us) absl::StrAppendFormat(&line, " %.4f", call);
        if (!SendLine(result_fd_, line)) return absl::UnavailableError("the parent is gone");
      }
    }
    return absl::OkStatus();
  }

  // input_ = this rank's input; expected_ = the exact result (kernels/reduce/exact_data.h): inputs
  // exact in any reduction order, for every type and operator, so that the check needs no tolerance
  // except NCCL's float average (UlpTolerance). Every row gets data of its own.
  void PrepareCheck(size_t index, const RowSpec& row) {
    data_ = {.type = row.type,
             .op = row.op,
             .ranks = config_.ranks,
             .seed = static_cast<uint64_t>(index) + 1};
    exact_data::FillReference(data_, 0, row.count, expected_.data());
    exact_data::FillInput(data_, rank_, 0, row.count, input_.data());
  }

  // One AllReduce as the benchmark issues it: the straggler's spin first.
  absl::Status Call(const RowSpec& row, const void* send, void* recv, cudaEvent_t before,
                    cudaEvent_t after) {
    if (rank_ == config_.straggler && config_.delayed()) {
      STRAGGLAR_RETURN_IF_ERROR(
          CudaStatus(LaunchSpinKernel(std::llround(config_.DelayUs(row.bytes) * 1e3), stream_),
                     "spin kernel launch"));
    }
    if (before != nullptr) {
      STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(before, stream_), "cudaEventRecord"));
    }
    STRAGGLAR_RETURN_IF_ERROR(
        NcclStatus(ncclAllReduce(send, recv, row.count, NcclDataType(row.type), NcclRedOp(row.op),
                                 comm_, stream_),
                   "ncclAllReduce", comm_));
    if (after != nullptr) {
      STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(after, stream_), "cudaEventRecord"));
    }
    return absl::OkStatus();
  }

  absl::Status Synchronize() {
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  absl::Status Upload(void* device, int64_t bytes) {
    return CudaStatus(
        cudaMemcpyAsync(device, input_.data(), bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpy to the device");
  }

  absl::Status Download(const void* device, int64_t bytes) {
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(scratch_.data(), device, bytes, cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpy from the device"));
    return Synchronize();
  }

  // Counts the wrong elements in scratch_ (the downloaded result) and says where on stderr.
  int64_t CheckResult(const RowSpec& row, bool in_place) {
    const exact_data::Mismatches result =
        exact_data::Compare(row.type, scratch_.data(), expected_.data(), row.count,
                            exact_data::UlpTolerance(data_, exact_data::Averaging::kScaleThenSum));
    if (result.count > 0) {
      std::cerr << absl::StrFormat(
          "%s: rank %d: %s %s %d B %s: %d wrong elements; first at index %d: got %s, expected "
          "%s\n",
          kProgram, rank_, TypeName(row.type), ReduceOpName(row.op), row.bytes,
          in_place ? "in place" : "out of place", result.count, result.first,
          exact_data::ElementString(row.type, scratch_.data(), result.first),
          exact_data::ElementString(row.type, expected_.data(), result.first));
    }
    return result.count;
  }

  absl::StatusOr<PlacementResult> RunPlacement(const RowSpec& row, bool in_place) {
    void* send = in_place ? recv_ : send_;
    if (config_.check) {
      STRAGGLAR_RETURN_IF_ERROR(Upload(send, row.bytes));
      // A result left over from an earlier row must not pass the check.
      if (!in_place) {
        STRAGGLAR_RETURN_IF_ERROR(
            CudaStatus(cudaMemsetAsync(recv_, 0xff, row.bytes, stream_), "cudaMemset"));
      }
    }
    PlacementResult result;
    STRAGGLAR_RETURN_IF_ERROR(TimeCalls(row, send, result));
    if (config_.check) STRAGGLAR_RETURN_IF_ERROR(Check(row, in_place, result));
    return result;
  }

  // --warmup_iters untimed calls, then --iters between two events (and with --delay_us each
  // between two events of its own).
  absl::Status TimeCalls(const RowSpec& row, void* send, PlacementResult& result) {
    for (int i = 0; i < config_.warmup; ++i) {
      STRAGGLAR_RETURN_IF_ERROR(Call(row, send, recv_, nullptr, nullptr));
    }
    STRAGGLAR_RETURN_IF_ERROR(Synchronize());
    const bool per_call = !call_events_.empty();
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(start_, stream_), "cudaEventRecord"));
    for (int i = 0; i < config_.iters; ++i) {
      STRAGGLAR_RETURN_IF_ERROR(Call(row, send, recv_, per_call ? call_events_[2 * i] : nullptr,
                                     per_call ? call_events_[2 * i + 1] : nullptr));
    }
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
    STRAGGLAR_RETURN_IF_ERROR(Synchronize());
    float ms = 0;
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime"));
    result.time_us = ms * 1e3 / config_.iters;
    if (per_call) {
      for (int i = 0; i < config_.iters; ++i) {
        STRAGGLAR_RETURN_IF_ERROR(
            CudaStatus(cudaEventElapsedTime(&ms, call_events_[2 * i], call_events_[2 * i + 1]),
                       "cudaEventElapsedTime"));
        result.call_us.push_back(ms * 1e3);
      }
    }
    return absl::OkStatus();
  }

  // -c 1: sets result.wrong.
  absl::Status Check(const RowSpec& row, bool in_place, PlacementResult& result) {
    if (!in_place) {
      // The last timed call's result, then the input, which must be untouched.
      STRAGGLAR_RETURN_IF_ERROR(Download(recv_, row.bytes));
      result.wrong = CheckResult(row, in_place);
      STRAGGLAR_RETURN_IF_ERROR(Download(send_, row.bytes));
      const exact_data::Mismatches changed =
          exact_data::Compare(row.type, scratch_.data(), input_.data(), row.count);
      if (changed.count > 0) {
        std::cerr << absl::StrFormat(
            "%s: rank %d: %s %s %d B out of place: the input buffer changed at %d elements "
            "(first at index %d)\n",
            kProgram, rank_, TypeName(row.type), ReduceOpName(row.op), row.bytes, changed.count,
            changed.first);
      }
      result.wrong += changed.count;
    } else {
      // The timed calls reduced the buffer into itself over and over: one more call on the
      // input, as the benchmark issues it.
      STRAGGLAR_RETURN_IF_ERROR(Upload(recv_, row.bytes));
      STRAGGLAR_RETURN_IF_ERROR(Call(row, recv_, recv_, nullptr, nullptr));
      STRAGGLAR_RETURN_IF_ERROR(Download(recv_, row.bytes));
      result.wrong = CheckResult(row, in_place);
    }
    return absl::OkStatus();
  }

  const Config& config_;
  const int rank_;
  const int device_;
  const int ctrl_fd_;
  const int result_fd_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  std::vector<cudaEvent_t> call_events_;
  // -c 1: the current row's data, this rank's input, the expected result, and what came back.
  exact_data::Spec data_;
  std::vector<char> input_;
  std::vector<char> expected_;
  std::vector<char> scratch_;
};

}  // namespace

int RankMain(const Config& config, int rank, int device, int ctrl_fd, int result_fd) {
  Rank process(config, rank, device, ctrl_fd, result_fd);
  return process.Main();
}

}  // namespace stragglar::nccl_bench
