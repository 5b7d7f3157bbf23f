//===- InputLimits.h - limits checked before parsing input ------*- C++ -*-===//
//
// MLIR's parser recurses once per level of nesting (attributes, types,
// regions), so input nested deeply enough overflows the stack: a segfault in
// kvpipe-opt, and through the C API, the death of the process that embeds
// kvpipe (Python, for one). The drivers check the text first and refuse it
// with a located error instead.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_SUPPORT_INPUTLIMITS_H
#define KVPIPE_SUPPORT_INPUTLIMITS_H

#include "mlir/Support/LLVM.h"
#include "llvm/Support/MemoryBufferRef.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace kvpipe {

/// The deepest bracket nesting the drivers accept. Real programs stay far
/// below it (an attention kernel nests about 10 levels); the parser's stack
/// use at this depth is a small fraction of a default 8 MiB stack, and of
/// the 1 MiB that some embedding applications give their threads.
constexpr unsigned kMaxInputNesting = 1000;

/// Checks that the textual IR in `buffer` nests brackets -- `(`, `[`, `{`,
/// `<` -- at most `maxDepth` deep (string literals and `//` comments
/// skipped). On failure, prints one located error to `errors`
/// (`file:line:col: error: ...`, with the source line) and returns failure.
/// MLIR bytecode is not textual and always passes.
mlir::LogicalResult checkInputNesting(llvm::MemoryBufferRef buffer,
                                      llvm::raw_ostream &errors,
                                      unsigned maxDepth = kMaxInputNesting);

} // namespace kvpipe

#endif // KVPIPE_SUPPORT_INPUTLIMITS_H
