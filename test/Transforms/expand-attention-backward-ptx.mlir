// RUN: kvpipe-opt %kvpipe_src_root/examples/attention-backward.mlir --kvpipe-to-ptx="ptx-file=%t.d128.ptx abi-file=%t.d128.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.d128.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.d128.ptx -o %t.d128.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS128 --implicit-check-not=warning %}
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.d64.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.d64.ptx -o %t.d64.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS64 --implicit-check-not=warning %}

// The backward family lowers to one PTX module of three entries (the
// example, head dim 128, and the declaration below, head dim 64, f16, not
// causal), which --kvpipe-to-ptx checks in strict protocol mode and ptxas
// assembles. The main kernel's roles rebalance registers with setmaxnreg,
// which ptxas honours (no C7508 warning).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa_bwd {head_dim = 64 : i64, element_type = f16, causal = false, backward = true}
}

// PTX-DAG: .entry fa_bwd_preprocess(
// PTX-DAG: .entry fa_bwd(
// PTX-DAG: .entry fa_bwd_postprocess(
// PTX-DAG: setmaxnreg.inc.sync.aligned.u32 240;
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX-DAG: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// PTX-DAG: st.shared.v4.{{[bf]}}32

// Head dim 64: no spills anywhere.
// PTXAS64: Compiling entry function 'fa_bwd_postprocess'
// PTXAS64: 0 bytes spill stores, 0 bytes spill loads
// PTXAS64: Compiling entry function 'fa_bwd'
// PTXAS64: 0 bytes spill stores, 0 bytes spill loads
// PTXAS64: Compiling entry function 'fa_bwd_preprocess'
// PTXAS64: 0 bytes spill stores, 0 bytes spill loads

// Head dim 128: assembles, no warnings; the main kernel spills under 200 B
// of stores and of loads (120/176 B when written: the fp32 P^T and the
// log-sum-exp columns held across the waits, docs/backward.md), the pre- and
// postprocess none.
// PTXAS128: Compiling entry function 'fa_bwd_postprocess'
// PTXAS128: 0 bytes spill stores, 0 bytes spill loads
// PTXAS128: Compiling entry function 'fa_bwd'
// PTXAS128: frame, {{1?[0-9]?[0-9]}} bytes spill stores, {{1?[0-9]?[0-9]}} bytes spill loads
// PTXAS128: Compiling entry function 'fa_bwd_preprocess'
// PTXAS128: 0 bytes spill stores, 0 bytes spill loads
