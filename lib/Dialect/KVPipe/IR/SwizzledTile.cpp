//===- SwizzledTile.cpp - the canonical shared-memory tile layout ---------===//

#include "kvpipe/Dialect/KVPipe/IR/SwizzledTile.h"

#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace kvpipe;

bool kvpipe::isWorkgroupMemRef(MemRefType type) {
  return gpu::GPUDialect::hasWorkgroupMemoryAddressSpace(type);
}

FailureOr<SwizzledTile>
kvpipe::getSwizzledTile(MemRefType type, int64_t swizzleBytes,
                        function_ref<InFlightDiagnostic()> emitError,
                        StringRef name) {
  if (!isMmaSwizzle(swizzleBytes))
    return emitError() << "'swizzle' must be 32, 64 or 128 bytes, got "
                       << swizzleBytes;
  if (!isWorkgroupMemRef(type))
    return emitError() << name
                       << " must be in workgroup (shared) memory, got " << type;
  Type elementType = type.getElementType();
  if (!elementType.isBF16() && !elementType.isF16())
    return emitError() << name << " must hold bf16 or f16 elements, got "
                       << elementType;
  if (type.getRank() != 2 && type.getRank() != 3)
    return emitError() << name
                       << " must be a rank-2 [rows][W] or rank-3 "
                          "[blocks][rows][W] tile, got rank "
                       << type.getRank();
  if (!type.hasStaticShape())
    return emitError() << name << " must have a static shape, got " << type;

  SwizzledTile tile;
  tile.elementType = elementType;
  tile.elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  tile.swizzleBytes = swizzleBytes;
  tile.width = swizzleBytes / tile.elementBytes;
  ArrayRef<int64_t> shape = type.getShape();
  tile.blocks = type.getRank() == 3 ? shape[0] : 1;
  tile.rows = shape[type.getRank() - 2];
  if (shape.back() != tile.width)
    return emitError() << name << " rows must span the " << swizzleBytes
                       << "-byte swizzle: innermost dimension " << tile.width
                       << " expected, got " << shape.back();
  if (tile.rows % 8 != 0)
    return emitError() << name
                       << " must have a multiple of 8 rows (one swizzle "
                          "atom), got "
                       << tile.rows;

  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return emitError() << name << " must have a strided layout, got " << type;
  int64_t rank = type.getRank();
  if (strides[rank - 1] != 1 || strides[rank - 2] != tile.width)
    return emitError() << name
                       << " rows must be contiguous and " << tile.width
                       << " elements apart, got strides " << type;
  // A row count this large overflows the products below; no tile can have
  // it (the footprint check gives the real limit).
  if (tile.rows > AttentionConfig::kMaxSharedMemoryBytes)
    return emitError() << name << " has " << tile.rows
                       << " rows, more than fit the "
                       << AttentionConfig::kMaxSharedMemoryBytes
                       << " bytes (227 KiB) of shared memory of an sm_90 CTA";
  tile.blockStride = tile.rows * tile.width;
  if (rank == 3) {
    tile.blockStride = strides[0];
    if (ShapedType::isDynamic(tile.blockStride) ||
        tile.blockStride < tile.rows * tile.width)
      return emitError() << name
                         << " blocks must be static and must not overlap, got "
                         << type;
  }
  // The tile lives in one CTA's shared memory: its end (a static offset,
  // then the first row of the first block to the last row of the last) must
  // be inside it. Checked before any byte arithmetic, which it then bounds.
  std::optional<int64_t> end = int64_t(0);
  if (tile.blocks != 0)
    end = llvm::checkedMulAdd(tile.blocks - 1, tile.blockStride,
                              tile.rows * tile.width);
  if (end && !ShapedType::isDynamic(offset))
    end = llvm::checkedAdd(*end, offset);
  if (end)
    end = llvm::checkedMul(*end, tile.elementBytes);
  if (!end || *end > AttentionConfig::kMaxSharedMemoryBytes) {
    InFlightDiagnostic diag = emitError() << name << " ends ";
    if (end)
      diag << *end << " bytes";
    else
      diag << "more than 2^63 bytes";
    return diag << " into shared memory, beyond the "
                << AttentionConfig::kMaxSharedMemoryBytes
                << " bytes (227 KiB) of an sm_90 CTA: " << type;
  }
  // The swizzle pattern repeats every 8 rows; wgmma descriptors and the
  // swizzled addresses assume every block starts on such an atom.
  int64_t atomBytes = 8 * swizzleBytes;
  if (tile.blockStrideBytes() % atomBytes != 0)
    return emitError() << name << " blocks must be " << atomBytes
                       << "-byte aligned for the " << swizzleBytes
                       << "-byte swizzle, got a block stride of "
                       << tile.blockStrideBytes() << " bytes";
  if (!ShapedType::isDynamic(offset) &&
      (offset * tile.elementBytes) % atomBytes != 0)
    return emitError() << name << " must start " << atomBytes
                       << "-byte aligned for the " << swizzleBytes
                       << "-byte swizzle, got an offset of "
                       << offset * tile.elementBytes << " bytes";
  return tile;
}
