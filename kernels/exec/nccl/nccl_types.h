// NCCL's names for our element types and operators, for every NCCL caller (executor, preload,
// benchmark), so that none keeps a table of its own.
#pragma once

#include <nccl.h>

#include "kernels/reduce/reduce.h"

namespace stragglar {

inline ncclDataType_t NcclDataType(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kUint32:
      return ncclUint32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUint64:
      return ncclUint64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kBfloat16:
      return ncclBfloat16;
  }
  return ncclUint8;
}

inline ncclRedOp_t NcclRedOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMaxNan:  // MPI's, never an NCCL call's
    case ReduceOp::kMinNan:
      break;
  }
  return ncclSum;
}

}  // namespace stragglar
