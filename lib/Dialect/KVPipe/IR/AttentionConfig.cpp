//===- AttentionConfig.cpp - configuration of an attention kernel ---------===//

#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "llvm/ADT/bit.h"

using namespace mlir;
using namespace kvpipe;

namespace {
/// The head dims the generator supports and the defaults it picks for each
/// (docs/performance.md, "Head dims"): FA3's sm_90 tiles (hopper/tile_size.h,
/// `tile_size_fwd_sm90`), two K/V stages as FA3 always uses, and register
/// budgets from `ptxas -v` (no spills). At 192 and 256 the K/V block is what
/// the 227 KiB of shared memory leave for two stages next to a 128-row Q.
struct HeadDimDefaults {
  int64_t headDim;
  int64_t valueHeadDim;
  int64_t consumerWarpgroups;
  int64_t blockN;
};
constexpr HeadDimDefaults kHeadDims[] = {
    // Measured on the H200 (docs/performance.md): at head dim 64 a third
    // consumer warpgroup (block_m 192) is 5-30 % faster; at 128 its 160
    // registers per thread are too few.
    {64, 64, 3, 128},
    {96, 96, 3, 112},
    {128, 128, 2, 128},
    {192, 128, 2, 128},
    {192, 192, 2, 112},
    {256, 256, 2, 80},
};

/// The K/V block of a paged kernel whose head dim's default is
/// `defaultBlockN` and whose pages hold `pageSize` rows: the largest block
/// of at most the default made of whole pages, or, with pages larger than
/// the default, the largest power of two dividing the page (head dims 96,
/// 192 and 256, whose defaults 112 and 80 are no powers of two).
int64_t defaultPagedBlockN(int64_t defaultBlockN, int64_t pageSize) {
  if (pageSize <= defaultBlockN)
    return defaultBlockN / pageSize * pageSize;
  return static_cast<int64_t>(llvm::bit_floor(
      static_cast<uint64_t>(defaultBlockN)));
}
} // namespace

FailureOr<AttentionConfig>
AttentionConfig::get(AttentionKernelOp op,
                     function_ref<InFlightDiagnostic()> emitError) {
  AttentionConfig c;
  c.headDim = op.getHeadDim();
  c.elementType = op.getElementType();
  c.causal = op.getCausal();
  if (!llvm::is_contained({64, 96, 128, 192, 256}, c.headDim))
    return emitError() << "'head_dim' must be 64, 96, 128, 192 or 256, got "
                       << c.headDim;
  c.valueHeadDim = op.getValueHeadDim().value_or(c.headDim);
  const HeadDimDefaults *defaults =
      llvm::find_if(kHeadDims, [&](const HeadDimDefaults &d) {
        return d.headDim == c.headDim && d.valueHeadDim == c.valueHeadDim;
      });
  if (defaults == std::end(kHeadDims))
    return emitError() << "'value_head_dim' must equal 'head_dim' ("
                       << c.headDim
                       << ") or be 128 with 'head_dim' = 192, got "
                       << c.valueHeadDim;
  if (!c.elementType.isBF16() && !c.elementType.isF16())
    return emitError() << "'element_type' must be bf16 or f16, got "
                       << c.elementType;

  c.backward = op.getBackward().value_or(false);
  c.deterministic = op.getDeterministic().value_or(false);
  if (c.deterministic && !c.backward)
    return emitError() << "'deterministic' applies to the backward pass only "
                          "(the forward is deterministic): it needs "
                          "'backward' = true";
  // dQ from registers is the default where it applies: with the second dO
  // slot its staging room holds, 5-15 % faster than staged bulk reductions
  // at 192 and even at 256 (H100, docs/backward.md, "Head dims 192 and
  // 256"); deterministic mode needs the staged ones.
  c.dqAtomics = op.getDqAtomics().value_or(
      c.backward && c.headDim > 128 && !c.deterministic);
  if (c.dqAtomics && !(c.backward && c.headDim > 128))
    return emitError() << "'dq_atomics' applies to the backward at head dims "
                          "above 128 (the consumers that split the head dim), "
                          "got "
                       << (c.backward ? "head_dim = " + std::to_string(c.headDim)
                                      : std::string("no 'backward'"));
  if (c.dqAtomics && c.deterministic)
    return emitError() << "'dq_atomics' is not supported with 'deterministic' "
                          "(the ordered dQ additions wait for staged bulk "
                          "reductions)";
  // The statistics in shared memory are the default (FA4's load_LSE and
  // load_dPsum; docs/backward.md "What stands between kvpipe and FA4");
  // `shared_statistics = false` reads them from global memory per thread.
  c.sharedStatistics = op.getSharedStatistics().value_or(c.backward);
  if (c.sharedStatistics && !c.backward)
    return emitError() << "'shared_statistics' applies to the backward pass "
                          "only: it needs 'backward' = true";
  if (!op.getScoreMod().empty())
    c.scoreMod = &op.getScoreMod();
  if (!op.getMaskMod().empty())
    c.maskMod = &op.getMaskMod();
  if (std::optional<ArrayAttr> aux = op.getAuxTypes())
    for (Attribute type : *aux)
      c.auxTypes.push_back(cast<TypeAttr>(type).getValue());
  if (std::optional<ArrayRef<int64_t>> grads = op.getAuxGrads())
    c.auxGrads.assign(grads->begin(), grads->end());
  c.sinks = op.getSinks().value_or(false);
  // dQ, dK and dV with sinks are the plain backward's with the forward's
  // log-sum-exp, which includes the sinks; their own gradient is a row sum
  // the caller takes (kvpipe.sinks.sink_gradient).
  if (c.sinks && c.backward)
    return emitError() << "'sinks' applies to the forward kernels: the "
                          "backward reads the forward's log-sum-exp, which "
                          "includes the sinks";
  if (c.backward) {
    // The backward's tiles are fixed (docs/backward.md): two consumer
    // warpgroups of 64 K/V rows each, Q/dO streamed in blocks of 64 rows;
    // above head dim 128 the warpgroups split the head dim (FA3's sm_90
    // choices: three warpgroups and 96 keys at 192, two and 64 at 256).
    std::pair<StringRef, bool> tuning[] = {
        {"block_n", op.getBlockN().has_value()},
        {"kv_stages", op.getKvStages().has_value()},
        {"q_stages", op.getQStages().has_value()},
        {"consumer_warpgroups", op.getConsumerWarpgroups().has_value()},
        {"producer_registers", op.getProducerRegisters().has_value()},
        {"consumer_registers", op.getConsumerRegisters().has_value()},
        {"overlap_softmax", op.getOverlapSoftmax().has_value()},
        {"exp2_emulation", op.getExp2Emulation().has_value()},
        {"rescale_threshold", op.getRescaleThreshold().has_value()},
        {"tensor_row_sums", op.getTensorRowSums().has_value()},
        {"skip_idle_warpgroups", op.getSkipIdleWarpgroups().has_value()},
        {"mask_bits", op.getMaskBits().has_value()},
        {"late_pv_retire", op.getLatePvRetire().has_value()},
        {"lpt_tiles", op.getLptTiles().has_value()},
        {"tile_table", op.getTileTable().has_value()},
        {"separable_bias", op.getSeparableBias().has_value()},
        {"separable_bias_mma", op.getSeparableBiasMma().has_value()},
        {"bias_origin_first", op.getBiasOriginFirst().has_value()},
        {"static_row_max", op.getStaticRowMax().has_value()},
        {"prescaled_q", op.getPrescaledQ().has_value()},
        {"bias_accumulator", op.getBiasAccumulator().has_value()},
        {"pingpong", op.getPingpong().has_value()},
        {"persistent", op.getPersistent().has_value()},
        {"kv_lengths", op.getKvLengths().has_value()},
        {"split_kv", op.getSplitKv().has_value()},
        {"pack_gqa", op.getPackGqa().has_value()},
        {"page_size", op.getPageSize().has_value()}};
    for (auto [name, present] : tuning)
      if (present)
        return emitError() << "'" << name
                           << "' is not supported with 'backward' (the "
                              "backward kernels' tiles and softmax are fixed "
                              "per head dim, docs/backward.md)";
    c.consumerWarpgroups = c.headDim == 192 ? 3 : 2;
    c.blockN = (c.backwardSplitsHeadDim() ? 32 : 64) * c.consumerWarpgroups;
    c.kvStages = 1;
    c.producerRegisters = 24;
    // The register file's 64 K per CTA: 24 for the producer warpgroup, the
    // rest (a multiple of 8) for the consumers.
    c.consumerRegisters = c.consumerWarpgroups == 3 ? 160 : 240;
    c.overlapSoftmax = c.pingpong = c.persistent = false;
    c.rescaleThreshold = -1; // the backward recomputes P from the statistics
    // The masks of the forward's block skipping (bottom-right alignment,
    // windows), turned around: a K/V block's Q blocks (MaskBounds).
    c.maskAlignment = op.getMaskAlignment().value_or(MaskAlignment::TopLeft);
    c.slidingWindow = op.getSlidingWindow().value_or(false);
    c.kvLengths = false;
    // Packed sequences (flash_attn_varlen_func's backward): each CTA reads
    // its sequence's rows from cu_seqlens, as the forward's.
    c.varlen = op.getVarlen().value_or(false);
    // The deterministic dQ turns number the K/V blocks that reach a Q block
    // 0 .. m, which only the top-left causal mask (or none) guarantees.
    // The tiles are fixed per head dim and fit (docs/backward.md, "Shared
    // memory and registers"); a layout change that outgrows the 227 KiB is
    // caught here rather than at launch.
    if (c.backwardSharedMemoryBytes() > kMaxSharedMemoryBytes)
      return emitError() << "the backward at head dim " << c.headDim
                         << " needs " << c.backwardSharedMemoryBytes()
                         << " bytes of shared memory, more than the "
                         << kMaxSharedMemoryBytes;
    // The ordered dQ turns count a head's K/V blocks from seq_kv, which a
    // packed batch has per sequence.
    if (c.deterministic && c.varlen)
      return emitError() << "'varlen' is not supported with 'deterministic' "
                            "in the backward (the ordered dQ additions number "
                            "the K/V blocks of one sequence length)";
    if (c.deterministic && c.slidingWindow)
      return emitError() << "'sliding_window' is not supported with "
                            "'deterministic' in the backward (the ordered dQ "
                            "additions assume the top-left causal mask or "
                            "none)";
    if (c.deterministic && c.causal &&
        c.maskAlignment == MaskAlignment::BottomRight)
      return emitError() << "'mask_alignment' = bottom_right is not supported "
                            "with 'deterministic' and 'causal' in the "
                            "backward (the ordered dQ additions assume the "
                            "top-left causal mask or none)";
    return c;
  }
  // A modifier's per-element work needs registers that a third consumer
  // warpgroup (160 each) does not leave: two by default then (240 each;
  // with three, the mask_mods of the check spilled at head dim 64).
  bool hasModifiers = !op.getScoreMod().empty() || !op.getMaskMod().empty();
  c.consumerWarpgroups = op.getConsumerWarpgroups().value_or(
      hasModifiers ? std::min<int64_t>(defaults->consumerWarpgroups, 2)
                   : defaults->consumerWarpgroups);
  if (c.consumerWarpgroups < 1 || c.consumerWarpgroups > 3)
    return emitError() << "'consumer_warpgroups' must be 1, 2 or 3, got "
                       << c.consumerWarpgroups;
  c.pageSize = op.getPageSize().value_or(0);
  if (op.getPageSize() && !llvm::is_contained({16, 32, 64, 128, 256}, c.pageSize))
    return emitError() << "'page_size' must be 16, 32, 64, 128 or 256, got "
                       << c.pageSize;
  c.blockN = op.getBlockN().value_or(
      c.pageSize ? defaultPagedBlockN(defaults->blockN, c.pageSize)
                 : defaults->blockN);
  if (c.blockN < 32 || c.blockN > 256 || c.blockN % 16 != 0)
    return emitError() << "'block_n' must be a multiple of 16 in [32, 256] "
                          "(the wgmma N of S = Q K^T), got "
                       << c.blockN;
  c.kvStages = op.getKvStages().value_or(2);
  c.overlapSoftmax = op.getOverlapSoftmax().value_or(true);
  c.exp2Emulation = op.getExp2Emulation().value_or(0);
  if (c.exp2Emulation < 0 || c.exp2Emulation > 8)
    return emitError() << "'exp2_emulation' counts the exp2s of every 8 "
                          "computed on the FMA pipe, so it must be in [0, 8], "
                          "got "
                       << c.exp2Emulation;
  c.rescaleThreshold = op.getRescaleThreshold().value_or(
      AttentionConfig::kDefaultRescaleThreshold);
  if (c.rescaleThreshold < -1 ||
      c.rescaleThreshold > AttentionConfig::kMaxRescaleThreshold)
    return emitError() << "'rescale_threshold' must be in [-1, "
                       << AttentionConfig::kMaxRescaleThreshold
                       << "] (P may reach 2^threshold in the element type; "
                          "-1: rescale in every iteration), got "
                       << c.rescaleThreshold;
  c.tensorRowSums = op.getTensorRowSums().value_or(false);
  // O += P [V | 1] is one wgmma of N = value_head_dim + 8; wgmma's N stops
  // at 256.
  if (c.tensorRowSums && c.accumulatorColumns() > 256)
    return emitError() << "'tensor_row_sums' needs 'value_head_dim' + 8 <= "
                          "256 (O += P [V | 1] is one wgmma, whose N is at "
                          "most 256), got 'value_head_dim' = "
                       << c.valueHeadDim;
  // Measured on the H200 (docs/performance.md, v4): +2-8 % at head dim 64
  // with three consumer warpgroups, +1-6 % at 128 from 2k keys on.
  c.pingpong = op.getPingpong().value_or(c.consumerWarpgroups > 1);
  if (c.pingpong && c.consumerWarpgroups < 2)
    return emitError() << "'pingpong' needs 2 or 3 consumer warpgroups to "
                          "take turns, got 'consumer_warpgroups' = "
                       << c.consumerWarpgroups;
  c.persistent = op.getPersistent().value_or(false);
  c.maskAlignment = op.getMaskAlignment().value_or(MaskAlignment::TopLeft);
  c.slidingWindow = op.getSlidingWindow().value_or(false);
  c.kvLengths = op.getKvLengths().value_or(false);
  // A persistent CTA's roles would each read a tile's length, and the
  // protocol checker cannot prove two loads equal.
  if (c.kvLengths && c.persistent)
    return emitError() << "'kv_lengths' is not supported with 'persistent' "
                          "(each tile's length would be read by each role)";
  c.splitKV = op.getSplitKv().value_or(false);
  c.packGQA = op.getPackGqa().value_or(0);
  if (op.getPackGqa() && (c.packGQA < 1 || c.packGQA > 64))
    return emitError() << "'pack_gqa' (query heads per K/V head packed into "
                          "a tile) must be in [1, 64] (a consumer warpgroup "
                          "holds 64 rows), got "
                       << c.packGQA;
  // The persistent loop stages its output and walks its tiles as
  // (Q block, head, batch) of one query head each.
  if (c.persistent && (c.splitKV || c.packGQA))
    return emitError() << "'" << (c.splitKV ? "split_kv" : "pack_gqa")
                       << "' is not supported with 'persistent'";
  c.varlen = op.getVarlen().value_or(false);
  if (c.pageSize) {
    // The block table is indexed by the batch's length (one kv_lengths[b]
    // per row of the table; a packed batch's from cu_seqlens_k), and a slot
    // of block_n keys must be whole pages or lie in one page.
    if (!c.kvLengths && !c.varlen)
      return emitError() << "'page_size' needs 'kv_lengths' = true or 'varlen' "
                            "= true (the length of each batch's row of the "
                            "block table)";
    if (c.blockN % c.pageSize != 0 && c.pageSize % c.blockN != 0)
      return emitError() << "'block_n' (" << c.blockN
                         << ") must be a multiple of 'page_size' ("
                         << c.pageSize << ") or divide it";
  }
  // The predicated epilogue stores from the staged Q rows, which a
  // persistent CTA reloads; the tile's offsets would be read by each role.
  if (c.varlen && c.persistent)
    return emitError() << "'varlen' is not supported with 'persistent' (the "
                          "predicated epilogue stages the output in the Q "
                          "rows, which a persistent CTA reloads)";
  // Packed K/V rows are addressed from cu_seqlens_k; the key counts of a
  // paged cache's sequences may come from kv_lengths instead (vLLM's
  // seqused_k), their keys from their rows of the block table.
  if (c.varlen && c.kvLengths && !c.pageSize)
    return emitError() << "'varlen' with 'kv_lengths' needs 'page_size' (packed "
                          "K/V rows are addressed by cu_seqlens_k; a paged "
                          "cache's key counts may come from kv_lengths)";
  // The decode families' tiles pack query heads or split the keys of one
  // sequence of a padded batch.
  if (c.varlen && (c.splitKV || c.packGQA))
    return emitError() << "'varlen' is not supported with '"
                       << (c.splitKV ? "split_kv" : "pack_gqa")
                       << "' (their tiles address padded batches)";
  c.maskBits = op.getMaskBits().value_or(false);
  c.latePvRetire = op.getLatePvRetire().value_or(false);
  if (c.latePvRetire && (!c.overlapSoftmax || c.rescaleThreshold < 0))
    return emitError() << "'late_pv_retire' moves the retire of the previous "
                          "block's P V behind the rescale's vote: it needs "
                          "'overlap_softmax' and a 'rescale_threshold' of 0 "
                          "or more";
  // Their tiles are a packed sequence's (varlen), a split's (split_kv) or a
  // group of query heads' (pack_gqa), numbered by their own rules.
  c.lptTiles = op.getLptTiles().value_or(false);
  if (c.lptTiles && (c.varlen || c.splitKV || c.packGQA))
    return emitError() << "'lpt_tiles' is not supported with '"
                       << (c.varlen ? "varlen" : c.splitKV ? "split_kv" : "pack_gqa")
                       << "' (their tiles are numbered by their own rules)";
  c.separableBias = op.getSeparableBias().value_or(false);
  c.separableBiasMma = op.getSeparableBiasMma().value_or(false);
  if (c.separableBiasMma && !c.separableBias)
    return emitError() << "'separable_bias_mma' adds the key term of "
                          "'separable_bias': it needs 'separable_bias' = true";
  // Its terms are evaluated once per tile at the tile's head; a pack_gqa
  // tile's rows are heads of their own.
  if (c.separableBias && c.packGQA)
    return emitError() << "'separable_bias' is not supported with 'pack_gqa' "
                          "(its terms are the tile's one head's)";
  c.biasOriginFirst = op.getBiasOriginFirst().value_or(false);
  if (c.biasOriginFirst && !c.separableBias)
    return emitError() << "'bias_origin_first' starts the K/V loop at the "
                          "origin of 'separable_bias': it needs "
                          "'separable_bias' = true";
  c.staticRowMax = op.getStaticRowMax().value_or(false);
  c.prescaledQ = op.getPrescaledQ().value_or(false);
  c.biasAccumulator = op.getBiasAccumulator().value_or(false);
  if (c.separableBiasMma && c.biasAccumulator)
    return emitError() << "'separable_bias_mma' and 'bias_accumulator' both "
                          "give S's initial accumulator: choose one";
  c.tileTable = op.getTileTable().value_or(false);
  // One tile per CTA, the grid is the tile space: there is no order to
  // give. The table holds tile indices in the grid's numbering, which
  // lpt_tiles would renumber.
  if (c.tileTable && !c.persistent)
    return emitError() << "'tile_table' needs 'persistent' = true (one tile "
                          "per CTA takes its tile from the grid)";
  if (c.tileTable && c.lptTiles)
    return emitError() << "'tile_table' and 'lpt_tiles' both order the "
                          "tiles: the table's order is the host's";
  c.skipIdleWarpgroups = op.getSkipIdleWarpgroups().value_or(false);
  if (c.skipIdleWarpgroups && c.consumerWarpgroups < 2)
    return emitError() << "'skip_idle_warpgroups' needs 2 or 3 consumer "
                          "warpgroups (one has rows in every tile), got "
                          "'consumer_warpgroups' = "
                       << c.consumerWarpgroups;
  // Their tiles' rows are packed heads (pack_gqa), a split's queries
  // (split_kv) or a packed sequence's, with their own epilogues.
  if (c.skipIdleWarpgroups && (c.varlen || c.splitKV || c.packGQA))
    return emitError() << "'skip_idle_warpgroups' is not supported with '"
                       << (c.varlen ? "varlen" : c.splitKV ? "split_kv" : "pack_gqa")
                       << "'";
  if (c.kvStages < 2 || c.kvStages > 8)
    return emitError() << "'kv_stages' must be in [2, 8], got " << c.kvStages;
  c.qStages = op.getQStages().value_or(1);
  if (c.qStages < 1 || c.qStages > 2)
    return emitError() << "'q_stages' must be 1 or 2, got " << c.qStages;
  // One tile per CTA loads Q once: a second slot would never be filled.
  if (c.qStages > 1 && !c.persistent)
    return emitError() << "'q_stages' = " << c.qStages
                       << " needs 'persistent' = true (a CTA of one tile "
                          "loads Q once)";

  // Registers: all warpgroups together have 64K; the producer gives most of
  // its share to the consumers (setmaxnreg wants multiples of 8 in
  // [24, 256]).
  // Defaults as FA3's: 56/240 with one consumer warpgroup, 24/240 with two,
  // 32/160 with three.
  static constexpr int64_t kDefaultRegisters[3][2] = {
      {56, 240}, {24, 240}, {32, 160}};
  c.producerRegisters = op.getProducerRegisters().value_or(
      kDefaultRegisters[c.consumerWarpgroups - 1][0]);
  c.consumerRegisters = op.getConsumerRegisters().value_or(
      kDefaultRegisters[c.consumerWarpgroups - 1][1]);
  for (auto [name, value] : {std::pair<StringRef, int64_t>{"producer_registers",
                                                           c.producerRegisters},
                             {"consumer_registers", c.consumerRegisters}})
    if (value < 24 || value > 256 || value % 8 != 0)
      return emitError() << "'" << name
                         << "' must be a multiple of 8 in [24, 256], got "
                         << value;
  int64_t registers =
      128 * (c.producerRegisters + c.consumerWarpgroups * c.consumerRegisters);
  if (registers > 65536)
    return emitError() << "'producer_registers' + " << c.consumerWarpgroups
                       << " * 'consumer_registers' must fit the 64K registers "
                          "of an SM for 128-thread warpgroups, got "
                       << registers << " registers";

  // The consumer's accumulators live in registers for the whole K/V loop: O
  // (value_head_dim / 2 fp32 per thread) and S (block_n / 2). A budget that
  // cannot even hold them spills in every iteration.
  int64_t accumulators = c.accumulatorColumns() / 2 + c.blockN / 2;
  if (accumulators > c.consumerRegisters)
    return emitError() << "'consumer_registers' = " << c.consumerRegisters
                       << " cannot hold the accumulators of a consumer thread: "
                       << c.accumulatorColumns() / 2 << " for O ('value_head_dim' "
                       << c.valueHeadDim
                       << (c.tensorRowSums ? ", and 8 row sums" : "") << ") and "
                       << c.blockN / 2
                       << " for S ('block_n' " << c.blockN
                       << "); lower 'block_n' or 'consumer_warpgroups'";

  if (c.dynamicSharedMemoryBytes() > kMaxSharedMemoryBytes) {
    InFlightDiagnostic diag = emitError();
    diag << "needs " << c.dynamicSharedMemoryBytes()
         << " bytes of shared memory (Q ";
    if (c.qStages > 1)
      diag << c.qStages << " x ";
    diag << c.qTileBytes() << ", K "
         << c.kvStages << " x " << c.kTileBytes() << ", V " << c.kvStages
         << " x " << c.vSlotBytes();
    if (c.keyOffsetsBytes())
      diag << ", key offsets " << c.keyOffsetsBytes();
    if (c.persistent)
      diag << ", O " << c.oTileBytes();
    diag << "), more than the " << kMaxSharedMemoryBytes
         << " of sm_90: lower 'kv_stages'"
         << (c.qStages > 1 ? ", 'q_stages'" : "") << " or 'block_n'";
    return diag;
  }
  return c;
}

LogicalResult AttentionKernelOp::verify() {
  if (!isa<gpu::GPUModuleOp>((*this)->getParentOp()))
    return emitOpError() << "must be declared inside a gpu.module";
  return AttentionConfig::get(*this, [&] { return emitOpError(); });
}
