//===- KVPipeDataOps.td - kvpipe data-path ops -------------*- tablegen -*-===//
//
// The data path of a pipelined kernel: TMA copies that complete on a
// pipeline's mbarrier, warpgroup MMAs on shared-memory tiles and register
// fragments, and the helpers a warp-specialised kernel needs.
//
// Shared-memory tiles use one canonical layout, the one TMA writes with a
// swizzled box whose inner dimension spans the swizzle width W
// (= swizzle bytes / element bytes): a tile of logical shape [R][C] is a
// memref<(C/W) x R x W x T, #gpu.address_space<workgroup>>, i.e. C/W column
// blocks of R rows of W elements, each row one swizzle span; a rank-2
// memref<R x W x T> is a single block.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDATAOPS_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDATAOPS_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeInterfaces.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.td"
include "mlir/Dialect/LLVMIR/LLVMOpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// TMA
//===----------------------------------------------------------------------===//

def KVPipe_TMALoadOp : KVPipe_Op<"tma_load",
    [MemoryEffects<[MemRead, MemWrite]>, AttrSizedOperandSegments,
     KVPipe_AsyncSlotCopyOpInterface]> {
  let summary = "TMA tile load that completes on an mbarrier";
  let description = [{
    Issues `cp.async.bulk.tensor` copying the box of `tensor_map` at
    `coordinates` (one per box dimension, outermost first, in elements) into
    the shared-memory tile `dest`, whose shape is the box's with unit
    dimensions dropped. The copy completes on `mbarrier` with
    `complete_tx` of the box's bytes; the producer's `kvpipe.producer_commit`
    expects exactly those bytes, summed by the compiler. Out-of-bounds
    elements are filled as the tensor map says (zero for kvpipe's runtime).
    Executed by the thread that issues it (normally one elected thread).

    With `multicast`, the copy is delivered to the same offset in the shared
    memory of every CTA of the cluster whose bit is set in the 16-bit mask.

    ```mlir
    kvpipe.tma_load %map[%b, %h, %row, %c0], %tile, %bar
        : !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
          memref<128x64xbf16, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins KVPipe_TensorMapType:$tensor_map,
                       Variadic<Index>:$coordinates,
                       AnyMemRef:$dest,
                       KVPipe_MBarrierType:$mbarrier,
                       Optional<I16>:$multicast_mask);
  let assemblyFormat = [{
    $tensor_map `[` $coordinates `]` `,` $dest `,` $mbarrier
    (`multicast` $multicast_mask^)? attr-dict `:` qualified(type($tensor_map))
    `,` type($dest)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::kvpipe::TensorMapType getTensorMapType() {
      return ::llvm::cast<::kvpipe::TensorMapType>(getTensorMap().getType());
    }
    /// Bytes this copy delivers to its mbarrier.
    int64_t getTransactionBytes() { return getTensorMapType().getBoxBytes(); }
    bool isMulticast() { return getMulticastMask() != nullptr; }
  }];
}

def KVPipe_BulkLoadOp : KVPipe_Op<"bulk_load",
    [MemoryEffects<[MemRead, MemWrite]>, KVPipe_AsyncSlotCopyOpInterface]> {
  let summary = "contiguous bulk copy into shared memory that completes on an mbarrier";
  let description = [{
    Issues `cp.async.bulk` (the non-tensor form, a 1-D TMA copy: the
    protocol checker's diagnostics call it a TMA load) copying the bytes of the
    contiguous shared-memory buffer `dest` from global memory at `source`.
    The copy completes on `mbarrier` with `complete_tx` of those bytes,
    which the producer's `kvpipe.producer_commit` expects as it does a TMA
    load's: a slot of a pipeline can be filled by TMA loads and bulk loads
    together (the backward's log-sum-exp and delta rows travel with their Q
    and dO tiles). No tensor map: the copy has no bounds and no swizzle, so
    `source` must be 16-byte aligned and the whole range readable; `dest`
    is a statically shaped, contiguous buffer of a multiple of 16 bytes.
    Executed by the thread that issues it.

    ```mlir
    kvpipe.bulk_load %lse, %row, %bar
        : !llvm.ptr, memref<64xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$source, AnyMemRef:$dest,
                       KVPipe_MBarrierType:$mbarrier);
  let assemblyFormat = [{
    $source `,` $dest `,` $mbarrier attr-dict `:` qualified(type($source)) `,`
    type($dest)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes this copy delivers to its mbarrier: the destination's.
    int64_t getTransactionBytes();
    bool isMulticast() { return false; }
  }];
}

def KVPipe_TMAStoreOp : KVPipe_Op<"tma_store",
    [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "TMA tile store from shared to global memory";
  let description = [{
    Issues `cp.async.bulk.tensor` (bulk-group completion) copying the
    shared-memory tile `source` to the box of `tensor_map` at
    `coordinates`. Elements outside the tensor's bounds are not written, so
    tails need no masking. The threads that wrote `source` must make their
    writes visible to the async proxy first (`fence.proxy.async` and a
    barrier among them); the issuing thread then commits and waits for the
    bulk group (`nvvm.cp.async.bulk.commit.group`,
    `nvvm.cp.async.bulk.wait_group`) before the tile is reused.

    ```mlir
    kvpipe.tma_store %tile, %map[%b, %h, %row, %c0]
        : memref<64x64xbf16, #gpu.address_space<workgroup>>,
          !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>
    ```
  }];
  let arguments = (ins AnyMemRef:$source, KVPipe_TensorMapType:$tensor_map,
                       Variadic<Index>:$coordinates);
  let assemblyFormat = [{
    $source `,` $tensor_map `[` $coordinates `]` attr-dict `:` type($source)
    `,` qualified(type($tensor_map))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::kvpipe::TensorMapType getTensorMapType() {
      return ::llvm::cast<::kvpipe::TensorMapType>(getTensorMap().getType());
    }
  }];
}

// A prefetch has no result: with a read effect alone, canonicalisation would
// delete it. Read and write keep it where it is.
def KVPipe_TMAPrefetchOp : KVPipe_Op<"tma_prefetch_descriptor",
    [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "prefetch a tensor map into the descriptor cache";
  let description = [{
    `prefetch.tensormap` on the kernel parameter holding the descriptor, so
    that the first TMA copy does not wait for it.

    ```mlir
    kvpipe.tma_prefetch_descriptor %map : !kvpipe.tensor_map<...>
    ```
  }];
  let arguments = (ins KVPipe_TensorMapType:$tensor_map);
  let assemblyFormat = "$tensor_map attr-dict `:` qualified(type($tensor_map))";
}

//===----------------------------------------------------------------------===//
// Warpgroup MMA (wgmma)
//===----------------------------------------------------------------------===//

def KVPipe_F32Fragment : VectorOfRankAndType<[1], [F32]>;
def KVPipe_HalfFragment : VectorOfRankAndType<[1], [BF16, F16]>;

def KVPipe_WarpgroupMmaOp : KVPipe_Op<"warpgroup_mma",
    [MemoryEffects<[MemRead, MemWrite]>,
     OptionalTypesMatchWith<"accumulator and result have the same type",
                            "result", "acc", "$_self">]> {
  let summary = "one wgmma group: D (64xN, f32) [+]= A (64xK) * B";
  let description = [{
    Executed by the 128 threads of one warpgroup. Computes the 64xN f32 tile
    `D = A * B (+ acc)` over the full K of the operands as `K/16`
    `wgmma.mma_async` instructions of shape m64nNk16, preceded by
    `wgmma.fence` and followed by `wgmma.commit_group`: the op is one wgmma
    group. The result registers are written asynchronously; read them only
    through `kvpipe.warpgroup_wait`, which retires the group.

    Operands:
    - `a`: either a shared-memory tile (the SS form) in the canonical swizzled
      layout, K-major: logical [64][K] as memref<(K/W) x 64 x W x T>; or a
      register fragment (the RS form) `vector<K/2 x T>` holding the thread's
      elements of the 64xK A tile in the accumulator layout (element `i` of
      thread `t` is row `16*(t/32) + (t%32)/4 + 8*((i%4)/2)`, column
      `8*(i/4) + 2*(t%4) + i%2`), e.g. P of attention converted to bf16.
    - `b`: a shared-memory tile. Without `transpose_b` it is K-major, the
      logical [N][K] tile of `B^T` (memref<(K/W) x N x W x T>), as K for
      `S = Q K^T`; with `transpose_b` it is MN-major, the logical [K][N]
      tile (memref<(N/W) x K x W x T>), as V for `O = P V`.
    - `transpose_a` (SS form only): A is MN-major, the logical [64][K] tile
      stored as [K][64] (memref<1 x K x W x T>, M contiguous), as the
      backward's dS tile written by `kvpipe.store_fragment` from the
      registers of dS^T and read for `dQ = dS K` (imm-trans-a = 1).
    - `acc`: optional accumulator `vector<N/2 x f32>` (accumulator layout);
      without it the first instruction zero-initialises D (scale-d = 0).

    N is the result's: twice its elements. It is B's N, or, for an MN-major
    B, a multiple of 8 that ends inside B's last block, whose first columns
    the wgmma then reads (the forward's `tensor_row_sums` reads 8 columns of
    a block of ones after V's blocks: `O += P [V | 1]`).

    `swizzle` (bytes, 32/64/128) is the layout of the shared-memory tiles
    (the swizzle of the TMA boxes that filled them); the compiler builds the
    wgmma matrix descriptors from it and the tiles' strides. T is bf16 or
    f16; N is a multiple of 8 up to 256, K a multiple of 16. The SS form
    lowers to `nvvm.wgmma.mma_async`, the RS form to inline PTX (upstream
    NVVM has no RS form).

    ```mlir
    %s = kvpipe.warpgroup_mma %q, %k {swizzle = 128}
        : memref<2x64x64xbf16, #gpu.address_space<workgroup>>,
          memref<2x128x64xbf16, #gpu.address_space<workgroup>> -> vector<64xf32>
    %o1 = kvpipe.warpgroup_mma %p, %v, %o {swizzle = 128, transpose_b}
        : vector<64xbf16>, memref<2x128x64xbf16, #gpu.address_space<workgroup>>
          -> vector<64xf32>
    ```
  }];
  let arguments = (ins AnyTypeOf<[AnyMemRef, KVPipe_HalfFragment]>:$a,
                       AnyMemRef:$b,
                       Optional<KVPipe_F32Fragment>:$acc,
                       DefaultValuedAttr<I64Attr, "128">:$swizzle,
                       UnitAttr:$transpose_b,
                       UnitAttr:$transpose_a);
  let results = (outs KVPipe_F32Fragment:$result);
  let assemblyFormat = [{
    $a `,` $b (`,` $acc^)? attr-dict `:` type($a) `,` type($b) `->`
    type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether A comes from registers (the RS form).
    bool isRegisterA() { return ::llvm::isa<::mlir::VectorType>(getA().getType()); }
    /// The instruction shape: M is always 64.
    int64_t getN();
    int64_t getK();
    ::mlir::Type getElementType();
  }];
}

def KVPipe_WarpgroupWaitOp : KVPipe_Op<"warpgroup_wait",
    [MemoryEffects<[MemRead, MemWrite]>, AllTypesMatch<["fragments", "results"]>]> {
  let summary = "retire wgmma groups until at most `pending` are in flight";
  let description = [{
    `wgmma.wait_group pending`: waits until at most `pending` of this
    warpgroup's wgmma groups (`kvpipe.warpgroup_mma` ops) are in flight.
    The fragments the retired groups produce pass through the op: use its
    results, not the `warpgroup_mma` results, so that no instruction reads
    an accumulator register before the hardware has written it (the
    lowering pins the registers with empty inline-asm fences, as CUTLASS's
    `warpgroup_fence_operand`).

    A slot of a pipeline whose tile a wgmma reads may be released
    (`kvpipe.consumer_release`) only after the wait that retires that wgmma.

    ```mlir
    %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
    ```
  }];
  let arguments = (ins Variadic<KVPipe_F32Fragment>:$fragments,
                       ConfinedAttr<I64Attr, [IntNonNegative, IntMaxValue<7>]>:$pending);
  let results = (outs Variadic<KVPipe_F32Fragment>:$results);
  let assemblyFormat =
      "($fragments^)? attr-dict (`:` type($fragments)^)?";
}

def KVPipe_StoreFragmentOp : KVPipe_Op<"store_fragment",
    [MemoryEffects<[MemWrite]>]> {
  let summary = "store a warpgroup's 64xN fragment into a swizzled tile";
  let description = [{
    Each of the 128 threads of a warpgroup writes its elements of a 64xN
    fragment (accumulator layout, see `kvpipe.warpgroup_mma`) into the
    shared-memory tile `dest` of logical shape [64][N] in the canonical
    swizzled layout (memref<(N/W) x 64 x W x T>), as the epilogue does before
    a TMA store. Each warp writes its 16 rows with `stmatrix.x4` (the
    accumulator layout is stmatrix's register layout: four 8x8 matrices,
    one 16-byte swizzled row segment per lane and instruction), so the op is
    warp-collective: all 32 lanes of each of the warpgroup's warps must
    execute it together (never under a per-thread condition).

    With `transpose` the tile holds the fragment's transpose, logical shape
    [N][64] (memref<(64/W) x N x W x T>): element (r, n) of the fragment goes
    to row n, column r (`stmatrix.x4.trans`). The backward at head dims 192
    and 256 accumulates dK^T and dV^T (rows: head-dim columns) and stores
    them this way into tiles laid out as K and V rows for the TMA store.

    ```mlir
    kvpipe.store_fragment %o, %tile {swizzle = 128}
        : vector<64xbf16>, memref<2x64x64xbf16, #gpu.address_space<workgroup>>
    kvpipe.store_fragment %dkt, %rows {swizzle = 64, transpose}
        : vector<32xbf16>, memref<2x64x32xbf16, #gpu.address_space<workgroup>>
    ```
  }];
  let arguments = (ins KVPipe_HalfFragment:$fragment, AnyMemRef:$dest,
                       DefaultValuedAttr<I64Attr, "128">:$swizzle,
                       UnitAttr:$transpose);
  let assemblyFormat =
      "$fragment `,` $dest attr-dict `:` type($fragment) `,` type($dest)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Warp specialisation
//===----------------------------------------------------------------------===//

def KVPipe_WarpgroupIdOp : KVPipe_Op<"warpgroup_id", [Pure]> {
  let summary = "the warpgroup of the calling thread, warp-uniform";
  let description = [{
    `threadIdx.x / 128`, broadcast from lane 0 of the warp (`shfl.sync`) so
    that the compiler knows it is uniform across the warp and role branches
    do not diverge. Kernels select producer and consumer roles with it and
    rebalance registers with `nvvm.setmaxregister`.

    ```mlir
    %wg = kvpipe.warpgroup_id : index
    ```
  }];
  let results = (outs Index:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDATAOPS_TD
