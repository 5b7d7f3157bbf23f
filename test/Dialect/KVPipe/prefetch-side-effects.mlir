// RUN: kvpipe-opt %s -canonicalize | FileCheck %s

// A descriptor prefetch has no result and must survive canonicalisation.
// Today KVPipeDataOps.td gives kvpipe.tma_prefetch_descriptor only
// MemoryEffects<[MemRead]>: an op that only reads and whose (no) results are
// unused is trivially dead, so -canonicalize deletes every prefetch. The fix
// is in the .td (MemRead and MemWrite, like the other data-path ops); remove

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

// CHECK-LABEL: func @prefetch_survives
//       CHECK:   kvpipe.tma_prefetch_descriptor
func.func @prefetch_survives(%m: !map) {
  kvpipe.tma_prefetch_descriptor %m : !map
  return
}
