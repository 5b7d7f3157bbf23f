//===- Passes.h - kvpipe conversion passes ----------------------*- C++ -*-===//

#ifndef KVPIPE_CONVERSION_PASSES_H
#define KVPIPE_CONVERSION_PASSES_H

#include "kvpipe/Conversion/KVPipeToNVVM/KVPipeToNVVM.h"

namespace kvpipe {
#define GEN_PASS_REGISTRATION
#include "kvpipe/Conversion/Passes.h.inc"
} // namespace kvpipe

#endif // KVPIPE_CONVERSION_PASSES_H
