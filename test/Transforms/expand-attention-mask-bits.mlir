// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `mask_bits`: a block that crosses seq_kv or a row's bounds is masked
// through one 32-bit word per row half and 32 keys: the kept elements are
// those whose column offset from the thread's first column lies in
// [first key, min(seq_kv, last key + 1)) - first column, counted with
// AccumulatorLayout::positionsLeftOf (2 (u / 8) + min(u % 8, 2), clamped to
// the fragment), and each element is one bit test and select, a row half
// after the other and each word's bits in order (ptxas: R2P, seven bits an
// instruction). The arithmetic is checked against the per-element mask in
// python/tests/test_mask_bits.py.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @causal {head_dim = 64 : i64, element_type = bf16, causal = true, mask_bits = true}
  kvpipe.attention_kernel @window {head_dim = 128 : i64, element_type = bf16, causal = true, sliding_window = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, mask_bits = true}
  kvpipe.attention_kernel @keys {head_dim = 128 : i64, element_type = f16, causal = false, block_n = 80 : i64, consumer_warpgroups = 3 : i64, mask_bits = true}
}

// CHECK-LABEL: gpu.func @causal(
//       CHECK:   kvpipe.warpgroup_mma
// The first row half: its end (seq_kv, or the row + 1 when sooner) right of
// the thread's first column, as positions: 2 (u / 8) + min(u % 8, 2).
//       CHECK:   %[[END:.*]] = arith.minsi %{{.*}}, %{{.*}} : i32
//       CHECK:   %[[U:.*]] = arith.subi %[[END]], %{{.*}} : i32
//       CHECK:   arith.maxsi %[[U]], %c0_i32 : i32
//       CHECK:   arith.minsi %{{.*}}, %c128_i32 : i32
//       CHECK:   arith.divui %{{.*}}, %c8_i32 : i32
//       CHECK:   arith.remui %{{.*}}, %c8_i32 : i32
//       CHECK:   arith.minui %{{.*}}, %c2_i32 : i32
// The word of its first positions: ~0 >> (32 - k), 0 when k = 0.
//       CHECK:   %[[SHIFT:.*]] = arith.subi %c32_i32, %{{.*}} : i32
//       CHECK:   %[[BITS:.*]] = arith.shrui %c-1_i32, %[[SHIFT]] : i32
//       CHECK:   %[[WORD0:.*]] = arith.select %{{.*}}, %c0_i32, %[[BITS]] : i32
// Position 0 of row half 0 is element 0, position 1 element 1, position 2
// element 4: one bit each.
//       CHECK:   %[[B0:.*]] = arith.andi %[[WORD0]], %c1_i32 : i32
//       CHECK:   %[[K0:.*]] = arith.cmpi ne, %[[B0]], %c0_i32 : i32
//       CHECK:   %[[E0:.*]] = vector.extract %{{.*}}[0] : f32 from vector<64xf32>
//       CHECK:   arith.select %[[K0]], %[[E0]], %{{.*}} : f32
//       CHECK:   arith.andi %[[WORD0]], %c2_i32 : i32
//       CHECK:   vector.extract %{{.*}}[1] : f32 from vector<64xf32>
//       CHECK:   arith.andi %[[WORD0]], %c4_i32 : i32
//       CHECK:   vector.extract %{{.*}}[4] : f32 from vector<64xf32>
//       CHECK:   vector.from_elements {{.*}} : vector<64xf32>

// A window adds the row's first key: the word keeps [begin, end).
// CHECK-LABEL: gpu.func @window(
//       CHECK:   arith.xori %{{.*}}, %c-1_i32 : i32
//       CHECK:   vector.from_elements

// 80-key blocks: 40 elements, 20 positions a row half, one word each.
// CHECK-LABEL: gpu.func @keys(
//       CHECK:   arith.minsi %{{.*}}, %c80_i32 : i32
//       CHECK:   vector.from_elements {{.*}} : vector<40xf32>

// Every kernel assembles without spills.
// PTXAS-COUNT-3: 0 bytes spill stores, 0 bytes spill loads
