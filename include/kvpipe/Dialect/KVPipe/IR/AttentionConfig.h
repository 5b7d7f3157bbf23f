//===- AttentionConfig.h - configuration of an attention kernel -*- C++ -*-===//
//
// What a `kvpipe.attention_kernel` declaration asks for, with the defaults
// the compiler picks per head dim filled in, and the derived shapes of the
// generated kernel. The verifier, the expansion and the ABI report all read
// the kernel's parameters from here.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_ATTENTIONCONFIG_H
#define KVPIPE_DIALECT_KVPIPE_IR_ATTENTIONCONFIG_H

#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Region.h"
#include "mlir/IR/Types.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>

namespace kvpipe {

/// The ABI dictionary the generator attaches to each kernel it builds
/// (docs/kernel-abi.md), and its key for the dynamic shared memory the
/// launch must give: the launchers read both, and so does a pass that
/// places buffers in that memory.
inline constexpr llvm::StringLiteral kAttentionAbiAttrName =
    "kvpipe.attention_abi";
inline constexpr llvm::StringLiteral kDynamicSharedMemoryKey =
    "dynamic_shared_memory";

class AttentionKernelOp;

struct AttentionConfig {
  /// The head dim of Q and K (the K of S = Q K^T).
  int64_t headDim;
  /// The head dim of V and O (the N of O = P V); `head_dim` unless the
  /// declaration's `value_head_dim` says otherwise.
  int64_t valueHeadDim;
  mlir::Type elementType;
  bool causal;
  int64_t blockN;
  int64_t kvStages;
  /// Slots of the Q ring (q_stages): 2 lets a persistent CTA load the next
  /// tile's Q while this tile's is read.
  int64_t qStages = 1;
  int64_t consumerWarpgroups;
  int64_t producerRegisters;
  int64_t consumerRegisters;
  /// Overlap the softmax of block j with the wgmmas of blocks j and j-1
  /// (FA3's intra-warpgroup pipelining).
  bool overlapSoftmax;
  /// Of every 8 elements of P, how many exp2s run on the FMA pipe as a
  /// polynomial instead of on the SFU (`exp2_emulation`, FA4's trick).
  int64_t exp2Emulation = 0;
  /// When the online softmax moves a row's running maximum
  /// (`rescale_threshold`): -1 rescales O in every iteration; t >= 0 only
  /// when a block's maximum passes the running one by more than t (base-2
  /// exponent units), O's rescale skipped for warps whose factors are all 1.
  int64_t rescaleThreshold = kDefaultRescaleThreshold;
  /// P may reach 2^8 = 256 (FA4's threshold): far inside bf16's and f16's
  /// range, and past it the maximum of random-like scores rarely moves after
  /// the first blocks.
  static constexpr int64_t kDefaultRescaleThreshold = 8;
  /// f16's largest finite value is 65504 < 2^16: P <= 2^15 stays finite.
  static constexpr int64_t kMaxRescaleThreshold = 15;
  /// The row sums of P on the tensor cores (`tensor_row_sums`): a ones block
  /// after V's blocks in each V slot, O's wgmma 8 columns wider.
  bool tensorRowSums = false;
  /// A consumer warpgroup without rows in its tile (all past seq_q) only
  /// drains the tile's K/V slots (`skip_idle_warpgroups`).
  bool skipIdleWarpgroups = false;
  /// Blocks masked through bit masks of 32 keys (`mask_bits`).
  bool maskBits = false;
  /// The previous block's P V retired behind the rescale's vote
  /// (`late_pv_retire`).
  bool latePvRetire = false;
  /// The grid's tiles in LPT order, (batch, head) pairs grouped to fit L2
  /// (`lpt_tiles`).
  bool lptTiles = false;
  /// A separable score bias split off the diagonal (`separable_bias`).
  bool separableBias = false;
  /// Its key term by a wgmma k-step from the key offsets tile
  /// (`separable_bias_mma`).
  bool separableBiasMma = false;
  /// The K/V blocks from the separable bias's origin outwards
  /// (`bias_origin_first`).
  bool biasOriginFirst = false;
  /// A constant row maximum where the score_mod's result is bounded
  /// (`static_row_max`).
  bool staticRowMax = false;
  /// Q's rows multiplied by the score_mod's scale once per tile
  /// (`prescaled_q`).
  bool prescaledQ = false;
  /// An additive score_mod's bias as the QK wgmma's initial accumulator
  /// (`bias_accumulator`).
  bool biasAccumulator = false;
  /// Persistent CTAs take their tiles from a table the host computes
  /// (`tile_table`: a runtime parameter).
  bool tileTable = false;
  /// The columns O's accumulator holds: V's, and the row sums' 8.
  int64_t accumulatorColumns() const {
    return valueHeadDim + (tensorRowSums ? 8 : 0);
  }
  /// Consumer warpgroups take turns issuing their wgmmas (named barriers),
  /// so that one's softmax overlaps another's GEMMs.
  bool pingpong;
  /// A grid of at most one CTA per SM looping over the tiles; the output is
  /// staged in its own buffer so that the next Q can load meanwhile.
  bool persistent;
  /// Where the causal diagonal and the window are anchored: query i at key
  /// i (top-left) or at key i + seq_kv - seq_q (bottom-right).
  MaskAlignment maskAlignment;
  /// Runtime `window_left` / `window_right` parameters bound the keys each
  /// query sees (negative: unbounded).
  bool slidingWindow;
  /// A runtime `kv_lengths` pointer gives each batch its own number of keys
  /// (a padded KV cache); seq_kv is the capacity.
  bool kvLengths;
  /// Split-KV (decode): the K/V blocks of a tile are split over a runtime
  /// `num_splits` CTAs writing fp32 partials that `<name>_combine` merges.
  bool splitKV = false;
  /// Pack-GQA: the query heads per K/V head packed into one tile (0: one
  /// query head per tile). A warpgroup's 64 rows are packedQueries() query
  /// positions times packGQA heads.
  int64_t packGQA = 0;
  /// Query positions per consumer warpgroup.
  int64_t packedQueries() const { return packGQA ? 64 / packGQA : 64; }
  /// Rows of a warpgroup that hold a (query, head) pair; the rest of the
  /// 64 are unused.
  int64_t usedRows() const { return packedQueries() * (packGQA ? packGQA : 1); }
  /// Query positions per tile (blockM() without packing).
  int64_t queriesPerTile() const {
    return packedQueries() * consumerWarpgroups;
  }
  /// Rows of a page of a paged K/V cache addressed through a runtime block
  /// table (`block_table`, `max_pages_per_seq`); 0: K and V are contiguous.
  int64_t pageSize = 0;
  /// Sequences packed without padding: runtime `cu_seqlens_q` /
  /// `cu_seqlens_k` offsets per batch; seq_q and seq_kv are the maxima; the
  /// output is stored with predicated stores, never past a sequence's end.
  bool varlen = false;
  /// gpt-oss's attention sinks: a runtime `sinks` pointer to one f32 logit
  /// per query head, one more key of value zero in each row's softmax
  /// (the epilogue's normaliser and log-sum-exp; the combine kernel's).
  bool sinks = false;

  /// Rows may be masked on the right of the diagonal (causal or a window).
  bool masksRight() const { return causal || slidingWindow; }
  /// Rows may be masked on the left of the diagonal (a window).
  bool masksLeft() const { return slidingWindow; }
  /// The backward family (docs/backward.md) instead of the forward kernel.
  bool backward;
  /// Backward only: dQ contributions added in a fixed order, so that the
  /// gradients are bit-identical run to run.
  bool deterministic;
  /// Backward above head dim 128: dQ added from registers by vector
  /// reductions instead of staged bulk reductions (`dq_atomics`).
  bool dqAtomics;
  /// Backward: each Q block's log-sum-exp and delta copied into shared
  /// memory by the producer, with Q and dO (`shared_statistics`).
  bool sharedStatistics;
  /// The declaration's modifier regions (docs/modifiers.md; null: none),
  /// valid while the declaration lives, and the element types of its
  /// auxiliary tensors (one `aux<i>` pointer parameter each).
  mlir::Region *scoreMod = nullptr;
  mlir::Region *maskMod = nullptr;
  llvm::SmallVector<mlir::Type> auxTypes;
  /// Backward only: the auxiliary tensors whose gradients the main kernel
  /// adds into `aux<i>_grad` (fp32, the tensor's elements) parameters.
  llvm::SmallVector<int64_t> auxGrads;

  /// Named barriers: 0 is the CTA barrier; consumer warpgroup c has
  /// kEpilogueBarriers + c for its epilogue and kScheduleBarriers + c for its
  /// turn in the ping-pong schedule.
  static constexpr int64_t kEpilogueBarriers = 1;
  static constexpr int64_t kScheduleBarriers = 4;

  /// Shared memory a CTA may use on sm_90 (227 KiB).
  static constexpr int64_t kMaxSharedMemoryBytes = 227 * 1024;
  /// The K/V bytes of one group of (batch, head) pairs under `lpt_tiles`:
  /// half of the H100's 50 MB L2 (FA3's LPT scheduler assumes 32 MB; half
  /// leaves room for Q, O and the other groups' tails).
  static constexpr int64_t kL2TileGroupBytes = 24 * 1024 * 1024;
  /// Slack for aligning the dynamic shared memory to a swizzle atom.
  static constexpr int64_t kAlignmentSlack = 1024;

  /// The shared-memory tile layout (SwizzledTile.h) of Q, K, V and O: a tile
  /// whose rows hold `dim` elements is stored as column blocks of one
  /// swizzle span each. A multiple of 64 elements uses the 128-byte swizzle
  /// (64 bf16/f16 per block); head dim 96 (192 bytes a row) uses the 64-byte
  /// swizzle, three blocks of 32, so that one layout covers the whole row.
  /// The tensor maps' boxes, the wgmma descriptors and the fragment store
  /// all take their swizzle from here.
  static int64_t swizzleBytesFor(int64_t dim) {
    return dim % 64 == 0 ? 128 : 64;
  }
  int64_t elementBytes() const { return 2; }
  /// Rows of one TMA box of K or V: a slot of block_n keys is filled by
  /// block_n / kvBoxRows() boxes, each from its page, when paged.
  int64_t kvBoxRows() const {
    return pageSize ? std::min(pageSize, blockN) : blockN;
  }
  /// Q and K tiles: rows of head_dim elements. The backward at head dims
  /// above 128 lays every tile out in 64-byte swizzle spans (32 columns), the
  /// width of one warpgroup's keys in its P and dS tiles (docs/backward.md).
  int64_t qkSwizzleBytes() const {
    return backwardSplitsHeadDim() ? 64 : swizzleBytesFor(headDim);
  }
  int64_t qkTileWidth() const { return qkSwizzleBytes() / elementBytes(); }
  int64_t qkBlocks() const { return headDim / qkTileWidth(); }
  /// V and O tiles: rows of value_head_dim elements.
  int64_t vSwizzleBytes() const {
    return backwardSplitsHeadDim() ? 64 : swizzleBytesFor(valueHeadDim);
  }
  int64_t vTileWidth() const { return vSwizzleBytes() / elementBytes(); }
  int64_t vBlocks() const { return valueHeadDim / vTileWidth(); }
  /// A V slot's blocks: V's, and the ones block of `tensor_row_sums`.
  int64_t vSlotBlocks() const { return vBlocks() + (tensorRowSums ? 1 : 0); }

  /// Query rows per CTA: 64 per consumer warpgroup (wgmma's M).
  int64_t blockM() const { return 64 * consumerWarpgroups; }
  int64_t threads() const { return 128 * (1 + consumerWarpgroups); }
  int64_t qTileBytes() const { return blockM() * headDim * elementBytes(); }
  int64_t kTileBytes() const { return blockN * headDim * elementBytes(); }
  int64_t vTileBytes() const { return blockN * valueHeadDim * elementBytes(); }
  /// Byte offsets in the (1024-aligned) dynamic shared memory.
  int64_t kOffset() const { return qStages * qTileBytes(); }
  int64_t vOffset() const { return kOffset() + kvStages * kTileBytes(); }
  int64_t vSlotBytes() const {
    return blockN * vTileWidth() * vSlotBlocks() * elementBytes();
  }
  /// `separable_bias_mma`'s tile of key offsets (K-major B operand of one
  /// k-step, [block_n][16] with the 32-byte swizzle: row n holds n),
  /// after the V ring, at a multiple of 1024 bytes.
  int64_t keyOffsetsOffset() const { return vOffset() + kvStages * vSlotBytes(); }
  static constexpr int64_t kKeyOffsetsWidth = 16;
  static constexpr int64_t kKeyOffsetsSwizzleBytes = 32;
  int64_t keyOffsetsBytes() const {
    return separableBiasMma && scoreMod
               ? llvm::alignTo(blockN * kKeyOffsetsWidth * elementBytes(), 1024)
               : 0;
  }
  /// The output staging tile (persistent kernels only; the others stage the
  /// output in the Q tile, which they do not reload and which is at least
  /// as large: value_head_dim <= head_dim). Last: --kvpipe-persistent-tiles
  /// places it after every other view of the shared memory.
  int64_t oOffset() const { return keyOffsetsOffset() + keyOffsetsBytes(); }
  int64_t oTileBytes() const {
    return persistent ? blockM() * valueHeadDim * elementBytes() : 0;
  }
  int64_t dynamicSharedMemoryBytes() const {
    return kAlignmentSlack + oOffset() + oTileBytes();
  }

  /// Backward (docs/backward.md): Q/dO rows per streamed block, and the
  /// K/V rows per CTA (blockN: 64 per consumer warpgroup, or 32 when the
  /// head dim is split).
  static constexpr int64_t kBackwardBlockM = 64;
  static constexpr int64_t kBackwardStages = 2;
  /// Head dims above 128 (FA3's sm_90 backward at 192 and 256): dK and dV
  /// do not fit a warpgroup's registers for 64 keys, so the warpgroups split
  /// the head dim instead of the keys. Warpgroup c computes S = Q K^T and
  /// dP = dO V^T for its 32 keys, writes P and dS to shared memory, and
  /// accumulates dV^T and dK^T for its head_dim / consumers rows (all the
  /// CTA's keys) and dQ for its columns.
  bool backwardSplitsHeadDim() const { return backward && headDim > 128; }
  /// The dO ring's slots: one when the head dim is split and dQ is staged
  /// (227 KiB then hold two Q slots, one dO slot, the P and dS buffers and
  /// the staging tiles; FA3's Stages_dO); two otherwise (dQ from registers
  /// frees the staging tiles' room for the second slot: 226 KiB at 256
  /// with the statistics rings).
  int64_t backwardDOStages() const {
    return backwardSplitsHeadDim() && !backwardDQFromRegisters()
               ? 1
               : kBackwardStages;
  }
  int64_t backwardQTileBytes() const {
    return kBackwardBlockM * headDim * elementBytes();
  }
  /// dO (and O) rows have value_head_dim elements.
  int64_t backwardDOTileBytes() const {
    return kBackwardBlockM * valueHeadDim * elementBytes();
  }
  /// Byte offsets in the dynamic shared memory of the backward's main
  /// kernel: K, V, the Q ring, the dO ring, the dS buffers (and with the
  /// head dim split, the P buffers), the consumers' dQ staging tiles.
  int64_t backwardVOffset() const { return kTileBytes(); }
  int64_t backwardQOffset() const { return kTileBytes() + vTileBytes(); }
  int64_t backwardDOOffset() const {
    return backwardQOffset() + kBackwardStages * backwardQTileBytes();
  }
  int64_t backwardDSOffset() const {
    return backwardDOOffset() + backwardDOStages() * backwardDOTileBytes();
  }
  /// One buffer of dS (or P): the CTA's block_n keys x 64 queries.
  int64_t backwardDSBufferBytes() const {
    return blockN * kBackwardBlockM * elementBytes();
  }
  int64_t backwardPOffset() const {
    return backwardDSOffset() + kBackwardDSBuffers * backwardDSBufferBytes();
  }
  /// Whether each consumer warpgroup computes its own column blocks of dQ
  /// over all block_n keys (FA3's split: it needs a column block of 64 per
  /// warpgroup, head dim 128), rather than the warpgroups taking turns by Q
  /// block, each computing all of dQ (head dim 64). Either way dQ reads both
  /// warpgroups' dS tiles, which are double buffered (docs/backward.md).
  bool backwardSplitsDQColumns() const {
    return backwardSplitsHeadDim() || (qkBlocks() >= consumerWarpgroups &&
                                       qkBlocks() % consumerWarpgroups == 0);
  }
  static constexpr int64_t kBackwardDSBuffers = 2;
  /// The named barrier of all the consumer warpgroups (dS tiles written;
  /// the backward has no ping-pong schedule, whose barriers these are).
  static constexpr int64_t kBackwardConsumersBarrier = kScheduleBarriers;
  /// The consumers' dQ staging tiles: each warpgroup's 64-row fp32 part of
  /// dQ of a Q block (its column blocks, or all of them), in
  /// fragment order (AccumulatorLayout.h), added to the accumulator by one
  /// bulk reduction.
  /// With the head dim split, a warpgroup computes, stages and reduces its
  /// dQ columns a block of `backwardSplitHeadDQColumns()` at a time.
  int64_t backwardDQOffset() const {
    return backwardLSEOffset() + backwardStatisticsRingBytes();
  }
  /// With `shared_statistics`: a ring of each Q block's 64 fp32
  /// log-sum-exp values (a slot per Q slot, filled on its barrier) and one
  /// of delta (per dO slot), after the dS and P buffers and before the
  /// staging tiles (FA4's sLSE and sdPsum). Before them: the checker bounds
  /// a staging tile's view by the end of the shared memory, since the
  /// warpgroup's tile is chosen at run time.
  static constexpr int64_t kBackwardStatisticsBytes = kBackwardBlockM * 4;
  /// The rings' fp32 shapes, [slots][kBackwardBlockM]: a slot per Q slot
  /// (log-sum-exp), per dO slot (delta).
  std::array<int64_t, 2> backwardLSERingShape() const {
    return {kBackwardStages, kBackwardBlockM};
  }
  std::array<int64_t, 2> backwardDeltaRingShape() const {
    return {backwardDOStages(), kBackwardBlockM};
  }
  int64_t backwardLSEOffset() const {
    return backwardPOffset() + (backwardSplitsHeadDim()
                                    ? kBackwardDSBuffers * backwardDSBufferBytes()
                                    : 0);
  }
  int64_t backwardDeltaOffset() const {
    return backwardLSEOffset() +
           backwardLSERingShape()[0] * kBackwardStatisticsBytes;
  }
  int64_t backwardStatisticsRingBytes() const {
    return sharedStatistics ? (backwardLSERingShape()[0] +
                               backwardDeltaRingShape()[0]) *
                                  kBackwardStatisticsBytes
                            : 0;
  }
  /// dQ added to the fp32 accumulator from registers (`dq_atomics`; by
  /// default with the head dim split outside deterministic mode): no
  /// staging tiles.
  bool backwardDQFromRegisters() const { return dqAtomics; }
  /// dQ's column blocks with the head dim split: two tile widths (N = 64,
  /// a wgmma that reads dS once for twice the math of N = 32, and half the
  /// staging rounds) where a warpgroup's columns divide into them and the
  /// wider staging tiles fit the shared memory (256: 225.75 KiB), else one
  /// (192: three warpgroups' 64 x 64 tiles would need 241 KiB).
  int64_t backwardSplitHeadDQColumns() const {
    int64_t narrow = qkTileWidth(), wide = 2 * narrow;
    bool wideDivides = (headDim / consumerWarpgroups) % wide == 0;
    // From registers nothing is staged; deterministic mode keeps one tile
    // width (the wide blocks spilled 48 B with the causal turns' registers).
    if (backwardDQFromRegisters())
      return wideDivides ? wide : narrow;
    if (deterministic)
      return narrow;
    int64_t wideBytes = kAlignmentSlack + backwardDQOffset() +
                        consumerWarpgroups * kBackwardBlockM * wide * 4;
    bool wideFits = wideDivides && wideBytes <= kMaxSharedMemoryBytes;
    return wideFits ? wide : narrow;
  }
  int64_t backwardDQTileBytes() const {
    if (backwardDQFromRegisters())
      return 0;
    int64_t columns = backwardSplitsHeadDim()   ? backwardSplitHeadDQColumns()
                      : backwardSplitsDQColumns() ? headDim / consumerWarpgroups
                                                  : headDim;
    return kBackwardBlockM * columns * 4;
  }
  int64_t backwardSharedMemoryBytes() const {
    return kAlignmentSlack + backwardDQOffset() +
           consumerWarpgroups * backwardDQTileBytes();
  }

  /// Reads and checks the declaration; reports the first unsupported
  /// attribute through `emitError`, naming it and what is supported.
  static mlir::FailureOr<AttentionConfig>
  get(AttentionKernelOp op,
      llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
};

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_IR_ATTENTIONCONFIG_H
