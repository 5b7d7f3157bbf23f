// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Every verifier message of the kernel-structure ops (KVPipeKernelOps.cpp
// and the accumulator layout of AccumulatorLayout.cpp), one case each.

func.func @producer_registers_range() {
  // expected-error @+1 {{'producer_registers' must be a multiple of 8 in [24, 256] (setmaxnreg), got 16}}
  kvpipe.warp_roles producer registers(16) {
  } consumers(2) registers(240) {
  ^bb0(%c: index):
  }
  return
}

// -----

func.func @consumer_registers_multiple() {
  // expected-error @+1 {{'consumer_registers' must be a multiple of 8 in [24, 256] (setmaxnreg), got 236}}
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(236) {
  ^bb0(%c: index):
  }
  return
}

// -----

func.func @consumers_range() {
  // expected-error @+1 {{'consumer_warpgroups' must be in [1, 7], got 0}}
  kvpipe.warp_roles producer registers(24) {
  } consumers(0) registers(240) {
  ^bb0(%c: index):
  }
  return
}

// -----

func.func @register_file() {
  // expected-error @+1 {{needs 92160 registers (128 threads x (producer_registers + 3 x consumer_registers)), more than the 64K of an SM}}
  kvpipe.warp_roles producer registers(24) {
  } consumers(3) registers(232) {
  ^bb0(%c: index):
  }
  return
}

// -----

func.func @producer_arguments() {
  // expected-error @+1 {{'producer' region must have no arguments}}
  kvpipe.warp_roles producer registers(24) {
  ^bb0(%x: index):
  } consumers(2) registers(240) {
  ^bb0(%c: index):
  }
  return
}

// -----

func.func @consumer_argument() {
  // expected-error @+1 {{'consumer' region must have one index argument (the consumer's index)}}
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  }
  return
}

// -----

func.func @consumer_argument_type() {
  // expected-error @+1 {{'consumer' region must have one index argument (the consumer's index)}}
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%c: i32):
  }
  return
}

// -----

func.func @row_max_row(%s: vector<64xf32>) -> f32 {
  // expected-error @+1 {{'row' must be 0 or 1 (a thread holds two rows of the accumulator), got 2}}
  %m = kvpipe.fragment_row_max %s[2] : vector<64xf32>
  return %m : f32
}

// -----

func.func @row_sum_row(%s: vector<64xf32>) -> f32 {
  // expected-error @+1 {{'row' must be 0 or 1 (a thread holds two rows of the accumulator), got -1}}
  %m = kvpipe.fragment_row_sum %s[-1] : vector<64xf32>
  return %m : f32
}

// -----

func.func @fragment_size(%s: vector<6xf32>) -> f32 {
  // expected-error @+1 {{fragment must have a positive multiple of 4 elements (the fragment of a 64 x N accumulator, N a multiple of 8), got 6}}
  %m = kvpipe.fragment_row_max %s[0] : vector<6xf32>
  return %m : f32
}

// -----

func.func @rescale_size(%o: vector<2xf32>, %a: f32) -> vector<2xf32> {
  // expected-error @+1 {{fragment must have a positive multiple of 4 elements}}
  %r = kvpipe.fragment_rescale %o, %a, %a : vector<2xf32>
  return %r : vector<2xf32>
}

// -----

func.func @exp2_size(%s: vector<10xf32>, %a: f32) -> vector<10xf32> {
  // expected-error @+1 {{fragment must have a positive multiple of 4 elements}}
  %r = kvpipe.fragment_exp2 %s, %a, %a, %a : vector<10xf32>
  return %r : vector<10xf32>
}

// -----

func.func @exp2_emulated(%s: vector<8xf32>, %a: f32) -> vector<8xf32> {
  // expected-error @+1 {{'kvpipe.fragment_exp2' op 'emulated' counts elements of every 8, so it must be in [0, 8], got 9}}
  %r = kvpipe.fragment_exp2 %s, %a, %a, %a {emulated = 9 : i64} : vector<8xf32>
  return %r : vector<8xf32>
}

// -----

// A negative count is named as written (the attribute's getter is unsigned).
func.func @exp2_emulated_negative(%s: vector<8xf32>, %a: f32) -> vector<8xf32> {
  // expected-error @+1 {{'kvpipe.fragment_exp2' op 'emulated' counts elements of every 8, so it must be in [0, 8], got -1}}
  %r = kvpipe.fragment_exp2 %s, %a, %a, %a {emulated = -1 : i64} : vector<8xf32>
  return %r : vector<8xf32>
}

// -----

func.func @element_type(%s: vector<64xf16>) -> f32 {
  // expected-error @+1 {{operand #0 must be vector of 32-bit float values of ranks 1}}
  %m = kvpipe.fragment_row_max %s[0] : vector<64xf16>
  return %m : f32
}

// -----

func.func @tile_in_role(%n: index) {
  kvpipe.warp_roles producer registers(24) {
    // expected-error @+1 {{must be outside 'kvpipe.warp_roles': the tile is the kernel's, shared by all of its roles}}
    kvpipe.tile in(%n, %n, %n) {
    ^bb0(%x: index, %y: index, %z: index):
      kvpipe.yield
    }
  } consumers(1) registers(240) {
  ^bb0(%c: index):
  }
  return
}

// -----

func.func @tile_in_tile(%n: index) {
  kvpipe.for_each_tile {
    // expected-error @+1 {{must be outside 'kvpipe.for_each_tile': the tile is the kernel's, shared by all of its roles}}
    kvpipe.tile in(%n, %n, %n) {
    ^bb0(%x: index, %y: index, %z: index):
      kvpipe.yield
    }
    kvpipe.yield
  }
  return
}

// -----

func.func @tile_coordinates(%n: index) {
  // expected-error @+1 {{region must have three index arguments (the tile's coordinates x, y, z)}}
  kvpipe.tile in(%n, %n, %n) {
  ^bb0(%x: index, %y: index):
    kvpipe.yield
  }
  return
}

// -----

func.func @tile_values(%n: index) {
  // expected-error @+1 {{region must end with 'kvpipe.yield' of the result types (the tile's values)}}
  %v = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%x: index, %y: index, %z: index):
    kvpipe.yield %x, %y : index, index
  } -> index
  return
}

// -----

func.func @tile_work_flag(%n: index) {
  // expected-error @+1 {{with 'has_work' must have an i1 first value (whether the tile has work)}}
  %x, %w = kvpipe.tile in(%n, %n, %n) has_work {
  ^bb0(%x: index, %y: index, %z: index):
    %inside = arith.cmpi slt, %x, %n : index
    kvpipe.yield %x, %inside : index, i1
  } -> index, i1
  return
}

// -----

func.func @tile_side_effects(%n: index, %buffer: memref<4xindex>) {
  kvpipe.tile in(%n, %n, %n) {
  ^bb0(%x: index, %y: index, %z: index):
    // expected-error @+1 {{writes memory (or may), but computes a value of the tile in 'kvpipe.tile' (which is computed again for each role and tile)}}
    memref.store %x, %buffer[%y] : memref<4xindex>
    kvpipe.yield
  }
  return
}

// -----

func.func @tile_value_outside(%n: index) -> index {
  // expected-error @+1 {{result #0 is used outside 'kvpipe.for_each_tile' (by 'func.return'): a tile's values belong to the tile's work}}
  %row = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%x: index, %y: index, %z: index):
    kvpipe.yield %x : index
  } -> index
  return %row : index
}

// -----

func.func @nested_tiles() {
  kvpipe.for_each_tile {
    // expected-error @+1 {{must not be nested in another 'kvpipe.for_each_tile'}}
    kvpipe.for_each_tile {
      kvpipe.yield
    }
    kvpipe.yield
  }
  return
}

// -----

func.func @tile_arguments(%a: index) {
  // expected-error @+1 {{region arguments must have the types of 'iter_args' (1 values)}}
  %r = kvpipe.for_each_tile iter_args(%a : index) {
  ^bb0(%x: i32):
    kvpipe.yield %a : index
  } -> index
  return
}

// -----

func.func @tile_yield(%a: index, %b: i32) {
  // expected-error @+1 {{'kvpipe.yield' must yield the types of 'iter_args' (the next tile's arguments)}}
  %r = kvpipe.for_each_tile iter_args(%a : index) {
  ^bb0(%x: index):
    kvpipe.yield %b : i32
  } -> index
  return
}

// -----

func.func @tile_results(%a: index) {
  // expected-error @+1 {{results must have the types of 'iter_args'}}
  %r = kvpipe.for_each_tile iter_args(%a : index) {
  ^bb0(%x: index):
    kvpipe.yield %x : index
  } -> i32
  return
}

// -----

func.func @yield_parent(%a: index) {
  // expected-error @+1 {{expects parent op to be one of 'kvpipe.for_each_tile, kvpipe.tile, kvpipe.attention_kernel'}}
  kvpipe.yield %a : index
}
