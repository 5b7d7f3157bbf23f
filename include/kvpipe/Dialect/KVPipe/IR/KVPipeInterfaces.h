//===- KVPipeInterfaces.h - kvpipe op interfaces ----------------*- C++ -*-===//
//
// PipelineProtocolOpInterface: what an op does in the protocol of a pipeline
// (KVPipeInterfaces.td documents each method).
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEINTERFACES_H
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEINTERFACES_H

#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"

#include "mlir/IR/OpDefinition.h"

#include <optional>

#include "kvpipe/Dialect/KVPipe/IR/KVPipeInterfaces.h.inc"

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEINTERFACES_H
