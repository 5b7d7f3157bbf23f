//===- KVPipeKernelOps.td - the parts of a generated kernel -*- tablegen -*-===//
//
// Intermediate ops that name the parts of a warp-specialised attention
// kernel: the warp roles (producer and consumer warpgroups with their
// register budgets), the tile of work (one per CTA, or a persistent loop
// over tiles) and the fragment-level steps of the online softmax on a
// wgmma accumulator (AccumulatorLayout.h). `--kvpipe-expand-attention`
// builds kernels from them; `--kvpipe-lower-warp-roles`,
// `--kvpipe-lower-tiles` and `--kvpipe-lower-fragment-ops` lower them to gpu/nvvm/scf/vector/arith, and
// a backward or decode kernel reuses them as they are.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEKERNELOPS_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEKERNELOPS_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"
include "mlir/Dialect/LLVMIR/LLVMOpBase.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Warp roles
//===----------------------------------------------------------------------===//

def KVPipe_WarpRolesOp : KVPipe_Op<"warp_roles",
    [RecursiveMemoryEffects, NoTerminator, SingleBlock]> {
  let summary = "producer and consumer warpgroups of a warp-specialised kernel";
  let description = [{
    Splits the CTA into roles by warpgroup (`threadIdx.x / 128`, through
    `kvpipe.warpgroup_id`): warpgroup 0 runs the `producer` region after
    lowering its register budget to `producer_registers`
    (`setmaxnreg.dec`); warpgroups 1 .. `consumer_warpgroups` run the
    `consumer` region after raising theirs to `consumer_registers`
    (`setmaxnreg.inc`), with the consumer's index (warpgroup - 1) as the
    region's argument. The budgets are per thread, multiples of 8 in
    [24, 256], and all warpgroups together fit the SM's 64K registers.

    Every role of the CTA must run the same pipeline protocol: what the
    producer commits, the consumers wait for (`--kvpipe-verify-protocol`).
    `--kvpipe-lower-warp-roles` lowers the op to an `scf.if` on the
    warpgroup id, as Triton's `nvws.warp_group` becomes a branch per
    partition.

    ```mlir
    kvpipe.warp_roles producer registers(24) {
      // TMA loads, one elected thread
    } consumers(2) registers(240) {
    ^bb0(%consumer: index):
      // wgmma, softmax, epilogue
    }
    ```
  }];
  let arguments = (ins I64Attr:$producer_registers,
                       I64Attr:$consumer_warpgroups,
                       I64Attr:$consumer_registers);
  let regions = (region SizedRegion<1>:$producer, SizedRegion<1>:$consumer);
  let assemblyFormat = [{
    `producer` `registers` `(` $producer_registers `)` $producer
    `consumers` `(` $consumer_warpgroups `)`
    `registers` `(` $consumer_registers `)` $consumer attr-dict
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "int64_t":$producerRegisters,
                   "int64_t":$consumerWarpgroups,
                   "int64_t":$consumerRegisters)>
  ];
  let extraClassDeclaration = [{
    ::mlir::Block &getProducerBlock() { return getProducer().front(); }
    ::mlir::Block &getConsumerBlock() { return getConsumer().front(); }
    /// The consumer's index (warpgroup - 1), the consumer region's argument.
    ::mlir::BlockArgument getConsumerIndex() {
      return getConsumerBlock().getArgument(0);
    }
  }];
}

def KVPipe_TurnTakersOp : KVPipe_Op<"turn_takers"> {
  let summary = "the consumer warpgroups that take the ping-pong turns";
  let description = [{
    In a consumer region of `kvpipe.warp_roles`: from this op to the end of
    its block, the consumer warpgroups that issue wgmma groups, and so take
    turns at the tensor cores under `--kvpipe-pingpong-schedule`, are the
    first `count` (1 to `consumer_warpgroups`); the others issue none there
    (the forward's `skip_idle_warpgroups`: a tile whose last warpgroups have
    no rows). The schedule passes each turn to the next of them, the last
    passing it back to consumer 0, and erases the op. Every turn taker must
    take the same number of turns, as without the op.

    ```mlir
    kvpipe.turn_takers %active
    ```
  }];
  let arguments = (ins Index:$count);
  let assemblyFormat = "$count attr-dict";
}

//===----------------------------------------------------------------------===//
// Tiles of work
//===----------------------------------------------------------------------===//

def KVPipe_TileOp : KVPipe_Op<"tile",
    [RecursiveMemoryEffects, SingleBlock]> {
  let summary = "the CTA's tile of work and the values computed from it";
  let description = [{
    The kernel's work is a grid of `size_x` x `size_y` x `size_z` tiles (x
    fastest; the forward kernel's tile is (Q block, head, batch), a
    backward kernel's (K/V block, head, batch), a decode kernel's (K/V
    split, head, batch)). The region receives the coordinates of the tile
    the kernel is working on and computes from them what the tile's work
    needs (its first row, its K/V block count, ...); the results are those
    values. They belong to the tile: they may be used only inside the
    `kvpipe.for_each_tile` regions, which are the work of one tile, and the
    region has no side effects.

    By default each CTA does one tile: `--kvpipe-lower-tiles` runs the
    region once, here, on `gpu.block_id x, y, z` (the grid is the tile
    space). The persistent rewrite (`--kvpipe-persistent-tiles`) instead
    makes every `kvpipe.for_each_tile` a loop over the tiles a CTA takes and
    computes the region in each iteration.

    The op belongs to the kernel, not to one role: it is not nested in a
    `kvpipe.warp_roles` or a `kvpipe.for_each_tile`.

    A `schedule` (a pointer to global memory, typically a kernel parameter)
    gives a persistent loop its order: CTA `i` takes, in round `r`, the
    tile whose linear index (`x + size_x * (y + size_y * z)`) is the i32 at
    `schedule[r * gridDim.x + i]`, until it reads one outside the tile
    space (-1). The host computes the table for the grid it launches
    (docs/kernel-abi.md, "Tile tables": a balanced, longest-first
    assignment of causal tiles, which no closed-form order gives) and does
    not write it while the kernel runs. One tile per CTA, the grid is the
    tile space and the schedule is not read.

    With `has_work`, the region's first value is an `i1`: false when the
    tile has no work, so that doing it would have no effect (a packed
    batch's Q block past its sequence's end: the grid is sized by the
    longest sequence). A lowering may then skip the tile: one tile per CTA,
    the CTA's whole work after the op (its barriers included) runs under
    `scf.if` on the flag, which every thread of the CTA computes alike; the
    persistent loop does the tile's work regardless.

    ```mlir
    %row, %head, %batch = kvpipe.tile in(%qblocks, %heads, %batches) {
    ^bb0(%qblock: index, %h: index, %b: index):
      %r = arith.muli %qblock, %c128 : index
      kvpipe.yield %r, %h, %b : index, index, index
    } -> index, index, index
    ```
  }];
  let arguments = (ins Index:$size_x, Index:$size_y, Index:$size_z,
                       Optional<LLVM_PointerInAddressSpace<1>>:$schedule,
                       UnitAttr:$has_work);
  let results = (outs Variadic<AnyType>:$values);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `in` `(` $size_x `,` $size_y `,` $size_z `)`
    (`schedule` `(` $schedule^ `)`)? (`has_work` $has_work^)? $body
    (`->` type($values)^)? attr-dict
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$valueTypes, "::mlir::Value":$sizeX,
                   "::mlir::Value":$sizeY, "::mlir::Value":$sizeZ,
                   CArg<"::mlir::Value", "{}">:$schedule,
                   CArg<"bool", "false">:$hasWork)>
  ];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def KVPipe_ForEachTileOp : KVPipe_Op<"for_each_tile",
    [RecursiveMemoryEffects, SingleBlock]> {
  let summary = "the work of one tile, repeated for each tile the CTA takes";
  let description = [{
    The region is the work one role does for one tile (`kvpipe.tile`):
    for a forward kernel's producer the tile's Q and K/V loads, for its
    consumers the attention and the epilogue. `inits` (pipeline states,
    typically) are the region's arguments for the first tile; the region
    yields (`kvpipe.yield`) the values for the next tile, and the op's
    results are those after the last.

    Every role of a kernel wraps its per-tile work in one such op, so the
    roles run the same tiles and their pipelines stay balanced. Lowered one
    tile per CTA (`--kvpipe-lower-tiles`), the region runs once; the
    persistent rewrite (`--kvpipe-persistent-tiles`) makes it a loop over
    the CTA's tiles.

    ```mlir
    %q1, %k1, %v1 = kvpipe.for_each_tile iter_args(%pq, %pk, %pv : !pq, !p, !p) {
    ^bb0(%q: !pq, %k: !p, %v: !p):
      // loads (producer) or attention and epilogue (consumers) of one tile
      kvpipe.yield %q2, %k2, %v2 : !pq, !p, !p
    } -> !pq, !p, !p
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inits);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`iter_args` `(` $inits^ `:` type($inits) `)`)? $body
    (`->` type($results)^)? attr-dict
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::ValueRange":$inits)>
  ];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def KVPipe_YieldOp : KVPipe_Op<"yield",
    [Pure, ReturnLike, Terminator,
     ParentOneOf<["ForEachTileOp", "TileOp", "AttentionKernelOp"]>]> {
  let summary = "the values a tile hands to the next";
  let description = [{
    Ends a `kvpipe.for_each_tile` region: its operands are the region's
    arguments for the next tile (the op's results after the last); or a
    `kvpipe.tile` region: its operands are the tile's values; or a modifier
    region of `kvpipe.attention_kernel`: the new score (`score_mod`) or
    whether the key is kept (`mask_mod`).

    ```mlir
    kvpipe.yield %q2, %k2, %v2 : !pq, !p, !p
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Fragment-level steps of the online softmax
//===----------------------------------------------------------------------===//

class KVPipe_FragmentOp<string mnemonic, list<Trait> traits = []>
    : KVPipe_Op<mnemonic, !listconcat(traits, [Pure])> {
  let hasVerifier = 1;
}

def KVPipe_FragmentRowMaxOp : KVPipe_FragmentOp<"fragment_row_max"> {
  let summary = "maximum of one row of an accumulator fragment";
  let description = [{
    The maximum (`maxnumf`: NaN-ignoring) of row half `row` (0 or 1) of a
    wgmma accumulator fragment `vector<N/2 x f32>` (AccumulatorLayout.h):
    over the thread's N/4 elements of that row, then across the 4 lanes of
    the row's quad (shuffle-xor 1 and 2), so every lane of the quad gets the
    whole row's maximum. The online softmax's running maximum.

    With `plus %offset`, each thread's elements count with its own `offset`
    added (before the quad's lanes are combined): the maximum of a row whose
    thread-relative key terms differ by lane (a separable score bias, whose
    per-element part is the key's offset from the thread's first column).

    ```mlir
    %m0 = kvpipe.fragment_row_max %s[0] : vector<64xf32>
    %m1 = kvpipe.fragment_row_max %s[1] plus %shift : vector<64xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$fragment,
                       I64Attr:$row, Optional<F32>:$offset);
  let results = (outs F32:$result);
  let assemblyFormat = [{
    $fragment `[` $row `]` (`plus` $offset^)? attr-dict `:` type($fragment)
  }];
}

def KVPipe_FragmentRowSumOp : KVPipe_FragmentOp<"fragment_row_sum"> {
  let summary = "the thread's part of the sum of one row of a fragment";
  let description = [{
    The sum of the thread's N/4 elements of row half `row` (0 or 1) of a
    wgmma accumulator fragment. Not combined across the row's quad: the
    online softmax keeps row sums per thread and combines the 4 lanes once,
    in the epilogue (`kvpipe.quad_sum`).

    ```mlir
    %l0 = kvpipe.fragment_row_sum %p[0] : vector<64xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$fragment,
                       I64Attr:$row);
  let results = (outs F32:$result);
  let assemblyFormat = "$fragment `[` $row `]` attr-dict `:` type($fragment)";
}

def KVPipe_QuadSumOp : KVPipe_Op<"quad_sum", [Pure]> {
  let summary = "sum of a per-thread row value across the row's 4 lanes";
  let description = [{
    Adds `value` over the 4 lanes that share a row of an accumulator
    fragment (lanes with equal `lane / 4`: shuffle-xor 1 and 2); every lane
    of the quad gets the sum. Completes a `kvpipe.fragment_row_sum`.

    ```mlir
    %sum = kvpipe.quad_sum %l0 : f32
    ```
  }];
  let arguments = (ins F32:$value);
  let results = (outs F32:$result);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def KVPipe_FragmentRescaleOp : KVPipe_FragmentOp<"fragment_rescale",
    [AllTypesMatch<["fragment", "result"]>]> {
  let summary = "multiply each row of a fragment by its own factor";
  let description = [{
    Multiplies row half 0 of the accumulator fragment by `factor0` and row
    half 1 by `factor1` (one scalar per row the thread holds): the online
    softmax's rescaling of `O` by `exp2(m_old - m_new)`, and the epilogue's
    normalisation by `1 / l`.

    `skip_unit` promises nothing new about the result, only that the
    factors are often exactly 1 (the online softmax's, when no row of a warp
    found a larger maximum): the lowering then multiplies only when some
    lane of the warp holds a factor other than 1 (`vote.sync.any`, a
    warp-uniform branch), which saves a multiply per accumulator element in
    most iterations of a long K/V loop.

    `late_retire` (with `skip_unit`): where the fragment is the only result of
    a `kvpipe.warpgroup_wait` with `pending = 0` in the same block, used only
    here, the lowering retires the group in each arm of the branch instead,
    after the vote, and moves the `consumer_release` ops between the two after
    the branch (a slot is still released only after the wgmma reading it
    retired). ptxas issues a wgmma wait as early as it can in its block: before
    the vote it lands at the start of the softmax, which then waits for the
    previous block's P V (docs/performance.md, v15).

    ```mlir
    %o1 = kvpipe.fragment_rescale %o, %alpha0, %alpha1 : vector<64xf32>
    %o2 = kvpipe.fragment_rescale %o, %alpha0, %alpha1 {skip_unit} : vector<64xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$fragment,
                       F32:$factor0, F32:$factor1, UnitAttr:$skip_unit,
                       UnitAttr:$late_retire);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat =
      "$fragment `,` $factor0 `,` $factor1 attr-dict `:` type($fragment)";
}

def KVPipe_FragmentExp2Op : KVPipe_FragmentOp<"fragment_exp2",
    [AllTypesMatch<["fragment", "result"]>]> {
  let summary = "exp2(x * scale - row offset) over a fragment";
  let description = [{
    `exp2(x * scale - offset_r)` for every element x of the accumulator
    fragment, with `offset0` for row half 0 and `offset1` for row half 1:
    the online softmax's `P = exp2(S c - m c)` with the scale folded into
    one FMA per element (FA2/FA3's trick).

    `emulated` (0 to 8, default 0): of every 8 consecutive elements, how many
    are computed on the FMA pipe with a polynomial rather than by the SFU's
    `ex2.approx` (MUFU.EX2, 16 a cycle per SM against 128 FMAs): FA4's exp2
    emulation, for kernels whose MUFU work bounds them (the softmax at head
    dim 64, a score_mod's tanh). The argument is rounded to the nearest
    integer j with the FMA pipe's rounding (adding and subtracting 1.5 x
    2^23), 2^(x - j) on [-0.5, 0.5] is a degree-3 polynomial (relative error
    7.5e-5, below bf16's and f16's half ulp), and j is added to its exponent
    bits; arguments below -125 (masked scores: -inf) give 0, and so do NaN
    and +inf (the softmax's arguments are finite or -inf; the SFU's path
    passes a NaN on).

    ```mlir
    %p = kvpipe.fragment_exp2 %s, %c, %mc0, %mc1 {emulated = 2 : i64} : vector<64xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$fragment, F32:$scale,
                       F32:$offset0, F32:$offset1,
                       DefaultValuedAttr<I64Attr, "0">:$emulated);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat = [{
    $fragment `,` $scale `,` $offset0 `,` $offset1 attr-dict `:` type($fragment)
  }];
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEKERNELOPS_TD
