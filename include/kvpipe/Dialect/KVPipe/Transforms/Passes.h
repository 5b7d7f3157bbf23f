//===- Passes.h - kvpipe dialect passes -------------------------*- C++ -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_H
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kvpipe {

#define GEN_PASS_DECL
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_H
