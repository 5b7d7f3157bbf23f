// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Regression (found by tools/fuzz/kvpipe_fuzz.py): the fragment constraints
// of kvpipe.warpgroup_mma and kvpipe.store_fragment admit scalable vectors,
// which have no fixed number of registers: a scalable accumulator made NVPTX
// abort in --kvpipe-to-ptx ("LLVM ERROR: Don't know how to legalize this
// scalable vector type"), a scalable store_fragment produced an invalid
// bitcast. The verifiers reject them.

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @scalable_accumulator(%a: !t, %b: !t, %acc: vector<[32]xf32>) {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op fragments must have a fixed size, got 'vector<[32]xf32>'}}
  %d = kvpipe.warpgroup_mma %a, %b, %acc : !t, !t -> vector<[32]xf32>
  return
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @scalable_register_a(%a: vector<[32]xbf16>, %b: !t) {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op fragments must have a fixed size, got 'vector<[32]xbf16>'}}
  %d = kvpipe.warpgroup_mma %a, %b : vector<[32]xbf16>, !t -> vector<32xf32>
  return
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @scalable_store(%f: vector<[32]xbf16>, %t: !t) {
  // expected-error @+1 {{'kvpipe.store_fragment' op fragments must have a fixed size, got 'vector<[32]xbf16>'}}
  kvpipe.store_fragment %f, %t : vector<[32]xbf16>, !t
  return
}
