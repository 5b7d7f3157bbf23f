// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `q_stages = 2`: Q is a ring of two slots, as K and V are, so that a
// persistent CTA's producer loads the next tile's Q while the consumers
// still read this tile's. The producer fills the slot its Q state points
// at; each consumer warpgroup waits for the tile's slot and takes its 64
// rows of it; the output is staged in a tile of its own after the rings
// (AttentionConfig::oOffset: Q 2 x 16 KiB, K 2 x 16 KiB, V 2 x 32 KiB with
// tensor_row_sums' ones). The protocol checker proves the kernel
// (--kvpipe-to-ptx, strict) and ptxas assembles it without spills.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @q2 {head_dim = 64 : i64, element_type = bf16, causal = true, consumer_warpgroups = 2 : i64, persistent = true, tensor_row_sums = true, mask_bits = true, late_pv_retire = true, q_stages = 2 : i64}
}

// CHECK-LABEL: gpu.func @q2(
//       CHECK:   %[[Q:.*]] = memref.view %{{.*}}[%{{.*}}][] {{.*}} to memref<2x1x128x64xbf16, #gpu.address_space<workgroup>>
//       CHECK:   %c131072 = arith.constant 131072 : index
//       CHECK:   %[[O_AT:.*]] = arith.addi %{{.*}}, %c131072 : index
//       CHECK:   %[[O:.*]] = memref.view %{{.*}}[%[[O_AT]]][] {{.*}} to memref<1x128x64xbf16, #gpu.address_space<workgroup>>
//       CHECK:   %c32768 = arith.constant 32768 : index
//       CHECK:   %[[PIPE_Q:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
// The producer: Q into the slot of its state.
//       CHECK:   kvpipe.producer_acquire %[[STATE_Q:[^ ]*]] :
//       CHECK:   %[[SLOT:.*]] = kvpipe.index %[[STATE_Q]] :
//       CHECK:   %[[Q_TILE:.*]] = memref.subview %[[Q]][%[[SLOT]], 0, 0, 0] [1, 1, 128, 64]
//       CHECK:   kvpipe.tma_load %{{.*}}, %[[Q_TILE]],
//       CHECK:   kvpipe.producer_commit %[[STATE_Q]]
// The consumers: the output's rows in the staging tile, Q's in the tile's slot.
//       CHECK:   memref.subview %[[O]][0, %[[ROWS:.*]], 0] [1, 64, 64]
//       CHECK:   kvpipe.consumer_wait %[[WAIT_Q:[^ ]*]] :
//  CHECK-NEXT:   %[[USE:.*]] = kvpipe.index %[[WAIT_Q]] :
//  CHECK-NEXT:   %[[Q_SLOT:.*]] = memref.subview %[[Q]][%[[USE]], 0, 0, 0] [1, 1, 128, 64]
//  CHECK-NEXT:   memref.subview %[[Q_SLOT]][0, %[[ROWS]], 0] [1, 64, 64]
//       CHECK:   kvpipe.consumer_release %[[WAIT_Q]]

// ABI: "dynamic_shared_memory": 148480
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
