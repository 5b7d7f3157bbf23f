//===- KVPipeOps.h - kvpipe operations --------------------------*- C++ -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEOPS_H
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEOPS_H

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeInterfaces.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kvpipe {
/// The mbarriers of kvpipe pipelines, as a side-effect resource.
struct BarrierResource
    : public mlir::SideEffects::Resource::Base<BarrierResource> {
  llvm::StringRef getName() final { return "kvpipe::barrier"; }
};
} // namespace kvpipe

#define GET_OP_CLASSES
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h.inc"

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEOPS_H
