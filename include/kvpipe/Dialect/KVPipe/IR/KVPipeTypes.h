//===- KVPipeTypes.h - kvpipe types -----------------------------*- C++ -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPETYPES_H
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPETYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "kvpipe/Dialect/KVPipe/IR/KVPipeAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h.inc"

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPETYPES_H
