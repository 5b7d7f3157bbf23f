//===- KVPipeKernelOps.td - the parts of a generated kernel -*- tablegen -*-===//
//
// Intermediate ops that name the parts of a warp-specialised attention
// kernel: the warp roles (producer and consumer warpgroups with their
// register budgets) and the fragment-level steps of the online softmax on a
// wgmma accumulator (AccumulatorLayout.h). `--kvpipe-expand-attention`
// builds kernels from them; `--kvpipe-lower-warp-roles` and
// `--kvpipe-lower-fragment-ops` lower them to gpu/nvvm/scf/vector/arith, and
// a backward or decode kernel reuses them as they are.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEKERNELOPS_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEKERNELOPS_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"
include "mlir/IR/OpBase.td"
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

    ```mlir
    %m0 = kvpipe.fragment_row_max %s[0] : vector<64xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$fragment,
                       I64Attr:$row);
  let results = (outs F32:$result);
  let assemblyFormat = "$fragment `[` $row `]` attr-dict `:` type($fragment)";
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

    ```mlir
    %o1 = kvpipe.fragment_rescale %o, %alpha0, %alpha1 : vector<64xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$fragment,
                       F32:$factor0, F32:$factor1);
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

    ```mlir
    %p = kvpipe.fragment_exp2 %s, %c, %mc0, %mc1 : vector<64xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$fragment, F32:$scale,
                       F32:$offset0, F32:$offset1);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat = [{
    $fragment `,` $scale `,` $offset0 `,` $offset1 attr-dict `:` type($fragment)
  }];
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEKERNELOPS_TD
