//===- AttentionConfig.cpp - configuration of an attention kernel ---------===//

#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace kvpipe;

FailureOr<AttentionConfig>
AttentionConfig::get(AttentionKernelOp op,
                     function_ref<InFlightDiagnostic()> emitError) {
  AttentionConfig c;
  c.headDim = op.getHeadDim();
  c.elementType = op.getElementType();
  c.causal = op.getCausal();
  if (c.headDim != 64 && c.headDim != 128)
    return emitError() << "'head_dim' must be 64 or 128, got " << c.headDim;
  if (!c.elementType.isBF16() && !c.elementType.isF16())
    return emitError() << "'element_type' must be bf16 or f16, got "
                       << c.elementType;

  // Measured on the H200 (docs/performance.md): at head dim 64 a third
  // consumer warpgroup (block_m 192) is 5-30 % faster; at 128 its 160
  // registers per thread are too few.
  c.consumerWarpgroups =
      op.getConsumerWarpgroups().value_or(c.headDim == 64 ? 3 : 2);
  if (c.consumerWarpgroups < 1 || c.consumerWarpgroups > 3)
    return emitError() << "'consumer_warpgroups' must be 1, 2 or 3, got "
                       << c.consumerWarpgroups;
  c.blockN = op.getBlockN().value_or(128);
  if (c.blockN < 32 || c.blockN > 256 || c.blockN % 16 != 0)
    return emitError() << "'block_n' must be a multiple of 16 in [32, 256] "
                          "(the wgmma N of S = Q K^T), got "
                       << c.blockN;
  c.kvStages = op.getKvStages().value_or(2);
  c.overlapSoftmax = op.getOverlapSoftmax().value_or(true);
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
  if (c.kvStages < 2 || c.kvStages > 8)
    return emitError() << "'kv_stages' must be in [2, 8], got " << c.kvStages;

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

  if (c.dynamicSharedMemoryBytes() > kMaxSharedMemoryBytes) {
    InFlightDiagnostic diag = emitError();
    diag << "needs " << c.dynamicSharedMemoryBytes()
         << " bytes of shared memory (Q " << c.qTileBytes() << ", K and V "
         << c.kvStages << " x " << c.kvTileBytes() << " each";
    if (c.persistent)
      diag << ", O " << c.oTileBytes();
    diag << "), more than the " << kMaxSharedMemoryBytes
         << " of sm_90: lower 'kv_stages' or 'block_n'";
    return diag;
  }
  return c;
}

LogicalResult AttentionKernelOp::verify() {
  if (!isa<gpu::GPUModuleOp>((*this)->getParentOp()))
    return emitOpError() << "must be declared inside a gpu.module";
  return AttentionConfig::get(*this, [&] { return emitOpError(); });
}
