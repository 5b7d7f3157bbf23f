//===- KVPipeDialect.h - kvpipe dialect -------------------------*- C++ -*-===//
//
// The kvpipe dialect: producer/consumer K/V pipelines for Hopper attention.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDIALECT_H
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h.inc"

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDIALECT_H
