//===- KVPipeInterfaces.cpp - kvpipe op interfaces ------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeInterfaces.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeInterfaces.cpp.inc"
