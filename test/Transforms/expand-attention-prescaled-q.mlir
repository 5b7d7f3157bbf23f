// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// `prescaled_q`: where the score_mod takes each score times the scale (and
// its leading constant factor, a soft-cap's 1 / cap), each consumer
// warpgroup multiplies its Q rows in shared memory by that factor once per
// tile, after Q's wait and before its first QK wgmma (16 B a thread, in f32,
// rounded back to bf16; a fence for the async proxy and the warpgroup's
// barrier), and the region takes the scores as they are: no multiplication
// per score. An additive region (ALiBi) has no multiplication to move:
// nothing changes there.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @softcap {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, prescaled_q = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
  // No leading factor: Q times the scale alone.
  kvpipe.attention_kernel @tanh {head_dim = 128 : i64, element_type = f16, causal = true, consumer_warpgroups = 2 : i64, prescaled_q = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %t = math.tanh %s fastmath<afn> : f32
    kvpipe.yield %t : f32
  }
  kvpipe.attention_kernel @alibi {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, prescaled_q = true, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // Without the attribute each score is multiplied.
  kvpipe.attention_kernel @softcap_default {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64}
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

// The factor: scale * log2(e) (the kernel's parameter) over log2(e), times
// 1 / 20; each thread's 4 chunks of the warpgroup's 64 x 64 rows.
// CHECK-LABEL: gpu.func @softcap(
//  CHECK-SAME:   %[[SCALE_LOG2:[^:]*]]: f32
//   CHECK-DAG:   %[[INV_LOG2E:.*]] = arith.constant 0.693147{{[0-9]*}} : f32
//   CHECK-DAG:   %[[INV_CAP:.*]] = arith.constant 5.000000e-02 : f32
//       CHECK:   kvpipe.consumer_wait
//       CHECK:   %[[S:.*]] = arith.mulf %[[SCALE_LOG2]], %[[INV_LOG2E]] : f32
//       CHECK:   %[[F:.*]] = arith.mulf %[[S]], %[[INV_CAP]] : f32
//       CHECK:   %[[FV:.*]] = vector.broadcast %[[F]] : f32 to vector<8xf32>
//       CHECK:   %[[Q:.*]] = vector.load %[[ROWS:[a-z_0-9]+]][%[[I:.*]], %[[J:.*]], %[[K:.*]]] : memref<1x64x64xbf16, {{.*}}>, vector<8xbf16>
//  CHECK-NEXT:   %[[QF:.*]] = arith.extf %[[Q]] : vector<8xbf16> to vector<8xf32>
//  CHECK-NEXT:   %[[P:.*]] = arith.mulf %[[QF]], %[[FV]] : vector<8xf32>
//  CHECK-NEXT:   %[[PB:.*]] = arith.truncf %[[P]] : vector<8xf32> to vector<8xbf16>
//  CHECK-NEXT:   vector.store %[[PB]], %[[ROWS]][%[[I]], %[[J]], %[[K]]]
// CHECK-COUNT-3: vector.store %{{.*}}, %[[ROWS]][
//       CHECK:   nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
//       CHECK:   nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
//       CHECK:   kvpipe.warpgroup_mma %[[ROWS]],
//       CHECK:   %[[SCORES:.*]] = kvpipe.warpgroup_wait
//       CHECK:   %[[E0:.*]] = vector.extract %[[SCORES]][0]
//  CHECK-NEXT:   llvm.inline_asm "tanh.approx.f32 $0, $1;", "=f,f" %[[E0]]
//       CHECK: gpu.return

// Head dim 128: two 64-column blocks of the rows, 8 chunks a thread.
// CHECK-LABEL: gpu.func @tanh(
//  CHECK-SAME:   %[[SCALE_LOG2:[^:]*]]: f32
//       CHECK:   kvpipe.consumer_wait
//       CHECK:   %[[S:.*]] = arith.mulf %[[SCALE_LOG2]], %{{.*}} : f32
//  CHECK-NEXT:   %[[FV:.*]] = vector.broadcast %[[S]] : f32 to vector<8xf32>
// CHECK-COUNT-8: arith.mulf %{{.*}}, %[[FV]] : vector<8xf32>
//       CHECK:   nvvm.fence.proxy
//       CHECK:   kvpipe.warpgroup_mma
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @alibi(
//   CHECK-NOT:   arith.extf {{.*}} : vector<8xbf16> to vector<8xf32>
//       CHECK:   kvpipe.warpgroup_mma
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @softcap_default(
//   CHECK-NOT:   arith.extf {{.*}} : vector<8xbf16> to vector<8xf32>
//       CHECK:   %[[SCORES:.*]] = kvpipe.warpgroup_wait
//       CHECK:   %[[E0:.*]] = vector.extract %[[SCORES]][0]
//  CHECK-NEXT:   %[[X0:.*]] = arith.mulf %[[E0]], %{{.*}} : f32
//  CHECK-NEXT:   llvm.inline_asm "tanh.approx.f32 $0, $1;", "=f,f" %[[X0]]
//       CHECK: gpu.return
