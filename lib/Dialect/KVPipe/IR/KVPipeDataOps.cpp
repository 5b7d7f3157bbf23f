//===- KVPipeDataOps.cpp - verifiers of the data-path ops -------*- C++ -*-===//

#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/IR/SwizzledTile.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace kvpipe;

/// Drops the unit dimensions of a shape.
static SmallVector<int64_t> squeeze(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> result;
  for (int64_t dim : shape)
    if (dim != 1)
      result.push_back(dim);
  return result;
}

/// Checks that `tile` can be the shared-memory side of a TMA copy of a box
/// of `map`: same element type, same shape up to unit dimensions,
/// contiguous, and aligned as TMA and the swizzle require.
static LogicalResult verifyTMATile(Operation *op, TensorMapType map,
                                   MemRefType tile, size_t numCoordinates,
                                   StringRef name) {
  if (numCoordinates != map.getBox().size())
    return op->emitOpError() << "expects " << map.getBox().size()
                             << " coordinates (one per box dimension), got "
                             << numCoordinates;
  if (!isWorkgroupMemRef(tile))
    return op->emitOpError() << name
                             << " must be in workgroup (shared) memory, got "
                             << tile;
  if (tile.getElementType() != map.getElementType())
    return op->emitOpError() << name << " element type "
                             << tile.getElementType()
                             << " does not match the tensor map's "
                             << map.getElementType();
  if (!tile.hasStaticShape() ||
      squeeze(tile.getShape()) != squeeze(map.getBox()))
    return op->emitOpError() << name << " shape must be the box ["
                             << map.getBox()
                             << "] up to unit dimensions, got " << tile;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(tile.getStridesAndOffset(strides, offset)))
    return op->emitOpError() << name << " must have a strided layout";
  // The shape equals the box (at most 256 per dimension, verified by the
  // tensor map type), so the dense strides cannot overflow; checked anyway,
  // since the shape is user input.
  int64_t expected = 1;
  for (int64_t i = tile.getRank() - 1; i >= 0; --i) {
    if (tile.getDimSize(i) != 1 && strides[i] != expected)
      return op->emitOpError() << name
                               << " must be contiguous (a TMA box is written "
                                  "densely), got "
                               << tile;
    std::optional<int64_t> next =
        llvm::checkedMul<int64_t>(expected, tile.getDimSize(i));
    if (!next)
      return op->emitOpError() << name << " has more elements than fit in "
                                          "64 bits, got "
                               << tile;
    expected = *next;
  }
  // TMA needs 128-byte aligned shared memory; a swizzled box also starts on
  // a swizzle atom (8 rows) so that the pattern matches the address bits.
  // The offset is user input: a huge one times the element size must not
  // wrap around into an aligned value (found by UBSan).
  int64_t align = map.getSwizzle() ? 8 * map.getSwizzle() : 128;
  if (!ShapedType::isDynamic(offset)) {
    std::optional<int64_t> offsetBytes =
        llvm::checkedMul<int64_t>(offset, map.getElementBytes());
    if (!offsetBytes || *offsetBytes < 0 ||
        *offsetBytes >= AttentionConfig::kMaxSharedMemoryBytes)
      return op->emitOpError()
             << name << " offset of " << offset
             << " elements is outside the "
             << AttentionConfig::kMaxSharedMemoryBytes
             << " bytes (227 KiB) of shared memory of an sm_90 CTA";
    if (*offsetBytes % align != 0)
      return op->emitOpError() << name << " must be " << align
                               << "-byte aligned, got an offset of "
                               << *offsetBytes << " bytes";
  }
  return success();
}

LogicalResult TMALoadOp::verify() {
  return verifyTMATile(*this, getTensorMapType(), getDest().getType(),
                       getCoordinates().size(), "destination");
}

//===----------------------------------------------------------------------===//
// BulkLoadOp
//===----------------------------------------------------------------------===//

int64_t BulkLoadOp::getTransactionBytes() {
  return getBufferBytes(getDest().getType());
}

LogicalResult BulkLoadOp::verify() {
  // cp.async.bulk reads the global window: a global or a generic pointer.
  unsigned space =
      cast<LLVM::LLVMPointerType>(getSource().getType()).getAddressSpace();
  if (space != 0 && space != 1)
    return emitOpError() << "source must be a global (address space 1) or "
                            "generic (0) pointer, got address space "
                         << space;
  MemRefType dest = getDest().getType();
  if (!isWorkgroupMemRef(dest))
    return emitOpError() << "destination must be in workgroup (shared) "
                            "memory, got "
                         << dest;
  if (!dest.getElementType().isIntOrFloat() ||
      dest.getElementTypeBitWidth() % 8 != 0)
    return emitOpError() << "destination elements must be whole bytes of an "
                            "integer or float type, got "
                         << dest.getElementType();
  if (!dest.hasStaticShape())
    return emitOpError() << "destination must have a static shape, got "
                         << dest;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(dest.getStridesAndOffset(strides, offset)))
    return emitOpError() << "destination must have a strided layout";
  // One contiguous range: the copy has no strides. The shape is static and
  // every dimension below 2^20 bytes in all (checked next), so the dense
  // strides cannot overflow.
  int64_t elementBytes = dest.getElementTypeBitWidth() / 8;
  // The shape is user input: its product may not fit 64 bits.
  std::optional<int64_t> bytes = elementBytes;
  for (int64_t dim : dest.getShape())
    if (bytes)
      bytes = llvm::checkedMul<int64_t>(*bytes, dim);
  // The largest multiple of 16 an mbarrier phase's transaction count
  // (kMaxTransactionBytes, 2^20 - 1) holds.
  constexpr int64_t kMaxBytes = kMaxTransactionBytes / 16 * 16;
  if (!bytes || *bytes <= 0 || *bytes % 16 != 0 || *bytes > kMaxBytes)
    return emitOpError() << "copies a positive multiple of 16 bytes, at most "
                         << kMaxBytes << " (an mbarrier phase's transaction "
                         << "count), got a destination of "
                         << (bytes ? std::to_string(*bytes) : "more than 2^63")
                         << " bytes";
  int64_t expected = 1;
  for (int64_t i = dest.getRank() - 1; i >= 0; --i) {
    if (dest.getDimSize(i) != 1 && strides[i] != expected)
      return emitOpError() << "destination must be contiguous (row-major "
                              "dense strides), got "
                           << dest;
    expected *= dest.getDimSize(i);
  }
  if (!ShapedType::isDynamic(offset)) {
    std::optional<int64_t> offsetBytes =
        llvm::checkedMul<int64_t>(offset, elementBytes);
    if (!offsetBytes || *offsetBytes < 0 ||
        *offsetBytes >= AttentionConfig::kMaxSharedMemoryBytes)
      return emitOpError() << "destination offset of " << offset
                           << " elements is outside the "
                           << AttentionConfig::kMaxSharedMemoryBytes
                           << " bytes (227 KiB) of shared memory of an sm_90 "
                              "CTA";
    if (*offsetBytes % 16 != 0)
      return emitOpError() << "destination must be 16-byte aligned, got an "
                              "offset of "
                           << *offsetBytes << " bytes";
  }
  return success();
}

LogicalResult TMAStoreOp::verify() {
  return verifyTMATile(*this, getTensorMapType(), getSource().getType(),
                       getCoordinates().size(), "source");
}

//===----------------------------------------------------------------------===//
// WarpgroupMmaOp
//===----------------------------------------------------------------------===//

Type WarpgroupMmaOp::getElementType() {
  if (auto vec = dyn_cast<VectorType>(getA().getType()))
    return vec.getElementType();
  return cast<MemRefType>(getA().getType()).getElementType();
}

int64_t WarpgroupMmaOp::getN() {
  return cast<VectorType>(getResult().getType()).getNumElements() * 2;
}

int64_t WarpgroupMmaOp::getK() {
  auto b = cast<MemRefType>(getB().getType());
  int64_t rank = b.getRank();
  // K-major B: [K/W][N][W]; MN-major B: [N/W][K][W].
  if (getTransposeB())
    return b.getDimSize(rank - 2);
  return (rank == 3 ? b.getDimSize(0) : 1) * b.getDimSize(rank - 1);
}

/// Fragments are registers: a scalable vector has no fixed number of them.
static LogicalResult verifyFixedFragments(Operation *op, TypeRange types) {
  for (Type type : types)
    if (auto vector = dyn_cast<VectorType>(type); vector && vector.isScalable())
      return op->emitOpError() << "fragments must have a fixed size, got "
                               << type;
  return success();
}

LogicalResult WarpgroupMmaOp::verify() {
  auto emit = [&]() { return emitOpError(); };
  if (failed(verifyFixedFragments(*this, getOperandTypes())) ||
      failed(verifyFixedFragments(*this, getResult().getType())))
    return failure();
  FailureOr<SwizzledTile> b =
      getSwizzledTile(getB().getType(), getSwizzle(), emit, "operand B");
  if (failed(b))
    return failure();
  int64_t n = getTransposeB() ? b->columns() : b->rows;
  int64_t k = getTransposeB() ? b->rows : b->columns();
  // A tile without blocks (memref<0x...>) has K = 0: no instruction would
  // write the result.
  if (k <= 0 || k % 16 != 0)
    return emitOpError() << "K must be a positive multiple of 16, got " << k;
  if (n % 8 != 0 || n < 8 || n > 256)
    return emitOpError() << "N must be a multiple of 8 in [8, 256], got " << n;

  if (auto aTile = dyn_cast<MemRefType>(getA().getType())) {
    FailureOr<SwizzledTile> a = getSwizzledTile(aTile, getSwizzle(), emit,
                                                "operand A");
    if (failed(a))
      return failure();
    if (a->elementType != b->elementType)
      return emitOpError() << "operands A and B must have the same element "
                              "type, got "
                           << a->elementType << " and " << b->elementType;
    // K-major A: [K/W][64][W]; MN-major A (transpose_a): [64/W][K][W].
    int64_t aRows = getTransposeA() ? a->columns() : a->rows;
    int64_t aK = getTransposeA() ? a->rows : a->columns();
    if (aRows != 64)
      return emitOpError() << "operand A must have 64 rows (wgmma's M), got "
                           << aRows;
    if (aK != k)
      return emitOpError() << "operand A has K = " << aK
                           << " but operand B has K = " << k;
  } else {
    if (getTransposeA())
      return emitOpError() << "'transpose_a' needs A in shared memory (the "
                              "SS form): a register fragment is K-major";
    auto aFrag = cast<VectorType>(getA().getType());
    if (aFrag.getElementType() != b->elementType)
      return emitOpError() << "operands A and B must have the same element "
                              "type, got "
                           << aFrag.getElementType() << " and "
                           << b->elementType;
    if (aFrag.getNumElements() * 2 != k)
      return emitOpError() << "register operand A must hold K/2 = " << k / 2
                           << " elements per thread, got "
                           << aFrag.getNumElements();
  }
  int64_t resultSize = cast<VectorType>(getResult().getType()).getNumElements();
  // An MN-major B may be wider than N by less than a block: N covers its
  // first blocks and the start of the last (O += P [V | 1] of the forward's
  // tensor_row_sums reads 8 columns of a ones block).
  bool partialLastBlock = getTransposeB() && resultSize * 2 < n &&
                          resultSize * 2 > n - b->width &&
                          (resultSize * 2) % 8 == 0;
  if (resultSize != n / 2 && !partialLastBlock) {
    InFlightDiagnostic diag = emitOpError()
                              << "result must hold N/2 = " << n / 2
                              << " f32 elements per thread";
    if (getTransposeB() && n > b->width)
      diag << " (or, reading only the start of B's last block, a multiple of "
              "4 above "
           << (n - b->width) / 2 << ")";
    return diag << ", got " << resultSize;
  }
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError() << "accumulator type " << getAcc().getType()
                         << " must match the result type "
                         << getResult().getType();
  return success();
}

LogicalResult StoreFragmentOp::verify() {
  auto emit = [&]() { return emitOpError(); };
  if (failed(verifyFixedFragments(*this, getFragment().getType())))
    return failure();
  FailureOr<SwizzledTile> tile =
      getSwizzledTile(getDest().getType(), getSwizzle(), emit, "destination");
  if (failed(tile))
    return failure();
  auto frag = cast<VectorType>(getFragment().getType());
  if (frag.getElementType() != tile->elementType)
    return emitOpError() << "fragment element type " << frag.getElementType()
                         << " does not match the tile's "
                         << tile->elementType;
  if (getTranspose()) {
    // The fragment's transpose: [N][64].
    if (tile->columns() != 64)
      return emitOpError() << "transposed destination must have 64 columns "
                              "(one warpgroup's fragment rows), got "
                           << tile->columns();
    if (frag.getNumElements() * 2 != tile->rows)
      return emitOpError() << "fragment must hold N/2 = " << tile->rows / 2
                           << " elements per thread for a transposed "
                           << tile->rows << "x64 tile, got "
                           << frag.getNumElements();
    if (tile->rows % 16 != 0)
      return emitOpError() << "transposed destination rows must be a "
                              "multiple of 16, got "
                           << tile->rows;
    return success();
  }
  if (tile->rows != 64)
    return emitOpError() << "destination must have 64 rows (one "
                            "warpgroup's fragment), got "
                         << tile->rows;
  if (frag.getNumElements() * 2 != tile->columns())
    return emitOpError() << "fragment must hold N/2 = " << tile->columns() / 2
                         << " elements per thread for a 64x"
                         << tile->columns() << " tile, got "
                         << frag.getNumElements();
  return success();
}
