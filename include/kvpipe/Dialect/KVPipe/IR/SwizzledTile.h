//===- SwizzledTile.h - the canonical shared-memory tile layout -*- C++ -*-===//
//
// kvpipe's data-path ops exchange tiles through shared memory in one layout:
// the one a TMA copy with a swizzled box of inner width W = swizzle bytes /
// element bytes writes. A tile of logical shape [R][C] is stored as C/W
// column blocks of R rows of W elements (memref<(C/W) x R x W x T>), every
// row one swizzle span. Verifiers and the lowering both read it from here.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_SWIZZLEDTILE_H
#define KVPIPE_DIALECT_KVPIPE_IR_SWIZZLEDTILE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"

namespace kvpipe {

/// A shared-memory tile in the canonical swizzled layout.
struct SwizzledTile {
  int64_t blocks;      ///< Column blocks (C / W).
  int64_t rows;        ///< Rows per block (R).
  int64_t width;       ///< Elements per row (W).
  int64_t blockStride; ///< Elements between consecutive blocks.
  int64_t elementBytes;
  int64_t swizzleBytes;
  mlir::Type elementType;

  /// Logical number of columns, C = blocks * W.
  int64_t columns() const { return blocks * width; }
  /// Bytes between blocks.
  int64_t blockStrideBytes() const { return blockStride * elementBytes; }
};

/// Whether `type` lives in workgroup (shared) memory.
bool isWorkgroupMemRef(mlir::MemRefType type);

/// The bytes a statically shaped shared-memory buffer of `type` spans (its
/// elements, dense): what a bulk copy into it transfers, and what it takes
/// of the kernel's shared memory.
inline int64_t getBufferBytes(mlir::MemRefType type) {
  return type.getNumElements() * type.getElementTypeBitWidth() / 8;
}

/// Reads the tile layout of `type` for a swizzle of `swizzleBytes` (32, 64
/// or 128), or reports why `type` is not such a tile through `emitError`,
/// naming the operand `name`.
mlir::FailureOr<SwizzledTile>
getSwizzledTile(mlir::MemRefType type, int64_t swizzleBytes,
                llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                llvm::StringRef name);

/// Whether `swizzleBytes` is a swizzle wgmma supports (32, 64 or 128).
inline bool isMmaSwizzle(int64_t swizzleBytes) {
  return swizzleBytes == 32 || swizzleBytes == 64 || swizzleBytes == 128;
}

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_IR_SWIZZLEDTILE_H
