//===- KVPipe.td - kvpipe dialect umbrella -----------------*- tablegen -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPE_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPE_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeDataOps.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeAttentionOps.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeKernelOps.td"

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPE_TD
