// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// `bias_origin_first`: the K/V loops start at the block holding the
// separable bias's origin (d = 0, where ALiBi's -slope |q - kv| is largest)
// for the tile's last row, walk down to the first block, then up from the
// block after the origin's. The bias falls in both directions, so a row's
// running maximum settles in the first blocks instead of growing block by
// block towards the diagonal (and rescaling O each time).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // ALiBi with the origin shifted by a per-head tensor (d = q - kv + shift):
  // the tile reads the shift to place the origin.
  kvpipe.attention_kernel @alibi {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 3 : i64, block_n = 80 : i64, separable_bias = true, bias_origin_first = true, aux_types = [f32, i32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %shift = kvpipe.aux_load 1[%h] : i32
    %shifti = arith.index_cast %shift : i32 to index
    %qs = arith.addi %q, %shifti : index
    %d = arith.subi %qs, %kv : index
    %c0 = arith.constant 0 : index
    %n = arith.subi %c0, %d : index
    %a = arith.maxsi %d, %n : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %bias = arith.mulf %slope, %af : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // A score_mod that is not a separable bias: the loops walk up as before.
  kvpipe.attention_kernel @softcap {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 3 : i64, block_n = 80 : i64, separable_bias = true, bias_origin_first = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
}

// CHECK-LABEL: gpu.func @alibi(
// Per tile: the last row (clamped to seq_q), d(last, last) = shift, the
// origin last - d / beta (beta = -1) and its block, clamped to the tile's.
//       CHECK:   kvpipe.tile in(
//       CHECK:     %[[ROW0:.*]] = arith.muli %{{.*}}, %c192 : index
//       CHECK:     %[[BLOCKS:.*]] = arith.ceildivui %{{.*}}, %c80 : index
//       CHECK:     %[[END:.*]] = arith.addi %[[ROW0]], %c192 : index
//       CHECK:     %[[ENDQ:.*]] = arith.minsi %[[END]], %{{.*}} : index
//       CHECK:     %[[LASTQ:.*]] = arith.subi %[[ENDQ]], %c1 : index
//       CHECK:     %[[LAST:.*]] = arith.maxsi %[[LASTQ]], %[[ROW0]] : index
//       CHECK:     llvm.load
//       CHECK:     %[[D:.*]] = arith.index_cast %{{.*}} : i32 to index
//       CHECK:     %[[DB:.*]] = arith.divsi %[[D]], %c-1 : index
//       CHECK:     %[[ORIGIN:.*]] = arith.subi %[[LAST]], %[[DB]] : index
//       CHECK:     %[[OBLOCK:.*]] = arith.floordivsi %[[ORIGIN]], %c80 : index
//       CHECK:     %[[LASTB:.*]] = arith.subi %[[BLOCKS]], %c1 : index
//       CHECK:     %[[CLAMPED:.*]] = arith.minsi %[[OBLOCK]], %[[LASTB]] : index
//       CHECK:     %[[TURN:.*]] = arith.maxsi %[[CLAMPED]], %c0 : index
//       CHECK:     kvpipe.yield {{.*}}, %[[BLOCKS]], %[[TURN]] : index, index, index, index, index, index
// The producer's loads and the consumers' blocks: iterations 0 to the turn
// from its block down, the rest their own index.
//       CHECK:   kvpipe.warp_roles
//       CHECK:   scf.for %[[J:.*]] = %c0 to %[[TILE:.*]]#4 step %c1
//       CHECK:     %[[DOWN:.*]] = arith.cmpi ule, %[[J]], %[[TILE]]#5 : index
//       CHECK:     %[[BACK:.*]] = arith.subi %[[TILE]]#5, %[[J]] : index
//       CHECK:     %[[BLOCK:.*]] = arith.select %[[DOWN]], %[[BACK]], %[[J]] : index
//       CHECK:     arith.muli %[[BLOCK]], %c80 : index
//       CHECK:     kvpipe.producer_acquire
//       CHECK:   scf.for %[[JC:.*]] = %c0 to %[[TILE]]#4 step %c1
//       CHECK:     kvpipe.consumer_wait
//       CHECK:     %[[DOWNC:.*]] = arith.cmpi ule, %[[JC]], %[[TILE]]#5 : index
//       CHECK:     %[[BACKC:.*]] = arith.subi %[[TILE]]#5, %[[JC]] : index
//       CHECK:     arith.select %[[DOWNC]], %[[BACKC]], %[[JC]] : index
//       CHECK:     kvpipe.warpgroup_mma

// CHECK-LABEL: gpu.func @softcap(
//       CHECK:   kvpipe.yield {{.*}} : index, index, index, index, index{{$}}
//   CHECK-NOT:   arith.cmpi ule
//       CHECK:   gpu.return

// PTXAS-NOT: bytes stack frame, {{[1-9]}}
// PTXAS-NOT: spill stores, {{[1-9]}}
