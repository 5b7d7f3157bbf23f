//===- KVPipeDialect.cpp - kvpipe dialect -----------------------*- C++ -*-===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kvpipe;

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.cpp.inc"

void KVPipeDialect::initialize() {
  registerTypes();
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.cpp.inc"
      >();
}
