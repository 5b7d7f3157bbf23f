//===- Passes.td - kvpipe dialect passes -------------------*- tablegen -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_TD
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandAttention : Pass<"kvpipe-expand-attention", "::mlir::ModuleOp"> {
  let summary = "Generate the gpu.func of each kvpipe.attention_kernel";
  let description = [{
    Replaces every `kvpipe.attention_kernel` declaration by a warp-specialised
    FlashAttention forward kernel (FA3's structure) written with kvpipe
    pipelines, TMA, wgmma and upstream dialects: warpgroup 0 produces (one
    thread loads Q once and streams K and V through two kvpipe rings of
    `kv_stages` slots), the consumer warpgroups compute `S = Q K^T` (wgmma
    SS), the online softmax in registers (exp2 with the scale folded into one
    FMA, running max and sum), `O += P V` (wgmma RS), and the epilogue
    (normalise, cast, TMA store, log-sum-exp); `setmaxnreg` moves registers
    from the producer to the consumers. The kernel ABI is attached to the
    function as `kvpipe.attention_abi` and, with `abi-file`, written as
    JSON (docs/kernel-abi.md).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
  let options = [
    Option<"abiFile", "abi-file", "std::string", /*default=*/"\"\"",
           "Write the ABI of the generated kernels to this JSON file">,
    Option<"stage", "stage", "std::string", /*default=*/"\"lowered\"",
           "Where to stop: 'skeleton' (the kernel in kernel-structure ops, "
           "no schedule rewrites), 'scheduled' (after the rewrites the "
           "configuration asks for, e.g. ping-pong), or 'lowered' (the "
           "kernel-structure ops lowered: the default)">,
  ];
}

def LowerWarpRoles : Pass<"kvpipe-lower-warp-roles"> {
  let summary = "Lower kvpipe.warp_roles to a branch per role";
  let description = [{
    Replaces every `kvpipe.warp_roles` by an `scf.if` on
    `kvpipe.warpgroup_id`: warpgroup 0 runs the producer region after
    `nvvm.setmaxregister decrease`, the others the consumer region after
    `nvvm.setmaxregister increase`, with the consumer index
    (warpgroup - 1) for the region's argument.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def LowerFragmentOps : Pass<"kvpipe-lower-fragment-ops"> {
  let summary = "Lower the online-softmax fragment ops to vector/gpu/math ops";
  let description = [{
    Expands `kvpipe.fragment_row_max`, `fragment_row_sum`,
    `fragment_rescale`, `fragment_exp2` and `quad_sum` on the wgmma
    accumulator layout (AccumulatorLayout.h): row halves are picked with
    `vector.shuffle` and reduced with `vector.reduction`, the 4 lanes of a
    row combined with `gpu.shuffle xor` 1 and 2, per-row scalars broadcast
    with a constant row-half mask. A `fragment_rescale {skip_unit}`
    multiplies under `scf.if` on `nvvm.vote.sync any` of its factors
    differing from 1.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::math::MathDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def LowerTiles : Pass<"kvpipe-lower-tiles"> {
  let summary = "Lower a kernel's tiles to one tile per CTA";
  let description = [{
    Inlines the region of every `kvpipe.tile` once, on `gpu.block_id x, y,
    z` (the grid is the tile space), and every `kvpipe.for_each_tile` region
    once, on its `iter_args`. The default for a kernel that `--kvpipe-persistent-tiles`
    did not make persistent. A tile with `has_work` first puts the kernel's
    work after it under `scf.if` on its flag: a CTA whose tile has no work
    leaves at once.
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def PersistentTiles : Pass<"kvpipe-persistent-tiles"> {
  let summary = "Each CTA loops over its tiles (a persistent kernel)";
  let description = [{
    Rewrites the tiles of every kernel with a `kvpipe.tile` for a grid of at
    most one CTA per SM: every `kvpipe.for_each_tile` becomes an `scf.while`
    over rounds, round r giving CTA i the tile `r * gridDim.x + i` (mirrored
    in odd rounds, a snake that pairs long and short tiles), while that tile
    exists; the tile's coordinates (x fastest) and the `kvpipe.tile` region
    on them (the tile's values) are computed in each iteration. A bulk
    store that a tile waited for right after committing it is waited for
    before the next tile's first write of the staged buffer and once after
    the loop; a staged buffer that a TMA load also fills gets a buffer of its
    own after the other shared-memory views (the host must provide its
    bytes: the ABI's `dynamic_shared_memory`).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def OverlapSoftmax : Pass<"kvpipe-overlap-softmax"> {
  let summary = "Overlap the softmax of K/V block j with the GEMMs of block j-1";
  let description = [{
    Rewrites each consumer K/V loop of every `kvpipe.warp_roles` (the
    skeleton's order: `S = Q K^T`, retire, release K, softmax, rescale O,
    `O += P V`, retire, release V) into FA3's intra-warpgroup pipelining:
    block 0's `S` and softmax are peeled, the steady state issues `S_j`
    together with `O += P_{j-1} V_{j-1}` and retires `S_j` first
    (`pending = 1`) so that its softmax runs under the tensor cores'
    `P_{j-1} V_{j-1}`, O is rescaled after that GEMM, and the last `P V`
    is peeled. The whole is guarded by `n > 0`. Every release still follows
    the retire of the wgmma that read the slot. Loops of another shape are
    left alone; a `kvpipe.warp_roles` without any is an error.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def PingPongSchedule : Pass<"kvpipe-pingpong-schedule"> {
  let summary = "Consumer warpgroups take turns issuing their wgmma groups";
  let description = [{
    Rewrites every `kvpipe.warp_roles` (with 2 or more consumer warpgroups)
    so that its consumers issue their wgmma groups in turn (FA3's
    inter-warpgroup ping-pong): a consumer waits at its own named barrier
    (`first-barrier` + consumer index, 256 threads) after the
    `consumer_wait` of a group's first slot, and after the group's last
    `kvpipe.warpgroup_mma` arrives at the next consumer's barrier; consumer
    0 opens the cycle. A group is a maximal run of wgmmas of a block with no
    `kvpipe.warpgroup_wait` between them.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
  ];
  let options = [
    Option<"firstBarrier", "first-barrier", "int64_t", /*default=*/"4",
           "The named barrier of consumer 0 (consumer c uses this + c)">,
  ];
}

def TestProtocolInterface : Pass<"kvpipe-test-protocol-interface"> {
  let summary = "Report what each pipeline op answers through "
                "PipelineProtocolOpInterface (for tests)";
  let description = [{
    Emits a remark at every op that implements
    `PipelineProtocolOpInterface`, with its side, sub-stage, whether it opens
    or closes the slot's sub-stage, the side whose barrier it uses, and the
    slots by which the state it returns is advanced: the answers the protocol
    checker, the analyses and the lowering work from
    (test/Dialect/KVPipe/protocol-interface.mlir). Changes nothing.
  }];
}

def VerifyProtocol : Pass<"kvpipe-verify-protocol"> {
  let summary = "Check the producer/consumer protocol of every kvpipe pipeline";
  let description = [{
    Follows the pipeline states of each pipeline through `scf.for`,
    `scf.if`, `scf.while` and calls, and reports at the offending op, naming
    the pipeline (where it was created, its type) and the sub-stage:
    - a state used after it was advanced (every state is consumed at most
      once by an advancing op: `kvpipe.step`, or `kvpipe.consumer_release`
      at the last sub-stage);
    - producer and consumer sides of one pipeline whose loops advance a
      different number of slots per iteration (with the same trip count), or
      a different total where trip counts are constant: the classic phase
      mismatch that hangs;
    - a `consumer_wait` without its `consumer_release` in the same block
      (loop iteration) or the reverse, a `producer_acquire` without its
      `producer_commit`, sub-stages out of `qk_stage` order, and a state
      advanced in only one branch of an `scf.if`;
    - a `consumer_release` of a slot that a `kvpipe.warpgroup_mma` reads
      while no `kvpipe.warpgroup_wait` (or `nvvm.wgmma.wait.group`) between
      them has retired that wgmma;
    - a TMA load completing on a producer barrier that no `producer_commit`
      counts, or a commit whose recorded transaction bytes disagree with its
      loads.
    - a `kvpipe.create` without exactly one `kvpipe.init` executed by the
      whole CTA (not under a condition or in a loop) before its first use;
    - data read before it landed: a `kvpipe.warpgroup_mma` reading a slot
      (through view ops, casts and calls) that no `consumer_wait` of that
      slot and sub-stage dominates;
    - a `kvpipe.step` past a slot whose sub-stages were not all committed,
      and sub-stages released or committed only in part;
    - states that alias: the same state passed twice, a loop that yields
      another iter_arg's state (the pipelines trade places) or a state from
      outside the loop, a loop body that uses the outer state instead of
      its iter_arg;
    - a ring slot reached around the view chain: a buffer that overlaps a
      slot at an offset not computed from a `kvpipe.index` (a second
      `memref.view` of the same bytes, a subview at a constant slot) is an
      access of the slots it overlaps, and an address taken out of a memref
      that may overlap a ring (`memref.extract_aligned_pointer_as_index`,
      `builtin.unrealized_conversion_cast`) for anything but view offsets is
      unproven;
    - a slot read (wgmma, loads) by threads that do not arrive on its
      `consumer_release`, unless an arriving thread is ordered after their
      reads (a thread of the warpgroup that retired the wgmma, a barrier
      that the readers and it reach);
    - rings that share bytes: two pipelines' slots in one buffer, or two
      rings that TMA or cp.async fill whose byte ranges overlap;
    - a wait-for cycle across pipelines (one role waits on B before it
      commits A, another waits on A before it commits B).
    What it cannot prove (a state through an op it does not model, an
    indirect call, trip counts it cannot compare, a wgmma operand it cannot
    follow) it reports as a warning that starts with "cannot prove"; with
    `strict` those are errors. Silence means proven
    (docs/protocol-checking.md states the contract).
    `--kvpipe-to-ptx` runs it first (its `verify-protocol=false` skips it).
  }];
  let options = [
    Option<"strict", "strict", "bool", /*default=*/"false",
           "Report what the checker cannot prove as errors, not warnings">,
  ];
}

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_TD
