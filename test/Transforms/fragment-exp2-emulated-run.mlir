// REQUIRES: mlir-runner
// RUN: kvpipe-opt %s --kvpipe-lower-fragment-ops --convert-vector-to-scf --convert-scf-to-cf \
// RUN:   --convert-vector-to-llvm --convert-math-to-llvm --convert-arith-to-llvm \
// RUN:   --convert-cf-to-llvm --convert-func-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s

// kvpipe.fragment_exp2 with `emulated`, run on the CPU: the polynomial exp2
// (FMA-pipe arithmetic, bit for bit what the GPU computes: adds, FMAs,
// integer ops) against libm's exp2f over the softmax's arguments [-125, 16]
// (above 0 where `rescale_threshold` keeps a stale row maximum: P <= 2^t),
// every element emulated (8 of 8) and 3 of 8 (the lanes shuffled to the
// polynomial and the SFU's exp2 and back: a lane out of place would be off
// by far more than the tolerance). Masked scores (-inf) give exactly 0.

// The worst relative error, below 8e-5 (the fit's 7.5e-5):
// CHECK: 1
// CHECK-NEXT: 1
// CHECK-NEXT: ( 0, 0, 0, 0, 0, 0, 0, 0 )
// CHECK-NEXT: ( 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 )

func.func @worst_error_all() -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 22560 : index
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %step = arith.constant 0.00625 : f32
  %lo = arith.constant -125.0 : f32
  %lanes = arith.constant dense<[0.0, 0.00078125, 0.0015625, 0.00234375, 0.003125, 0.00390625, 0.0046875, 0.00546875]> : vector<8xf32>
  %worst = scf.for %i = %c0 to %n step %c1 iter_args(%w = %zero) -> (f32) {
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %offset = arith.mulf %fi, %step : f32
    %base = arith.addf %lo, %offset : f32
    %b = vector.broadcast %base : f32 to vector<8xf32>
    %s = arith.addf %b, %lanes : vector<8xf32>
    %p = kvpipe.fragment_exp2 %s, %one, %zero, %zero {emulated = 8 : i64} : vector<8xf32>
    %exact = math.exp2 %s : vector<8xf32>
    %d = arith.subf %p, %exact : vector<8xf32>
    %r = arith.divf %d, %exact : vector<8xf32>
    %a = math.absf %r : vector<8xf32>
    %m = vector.reduction <maximumf>, %a : vector<8xf32> into f32
    %next = arith.maximumf %w, %m : f32
    scf.yield %next : f32
  }
  return %worst : f32
}

// Lanes i mod 8 < 3 on the polynomial, the others on exp2; the scale and
// the two row halves' offsets applied as in the softmax (x * c - m_r).
func.func @worst_error_mixed() -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 2380 : index
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.5 : f32
  %m0 = arith.constant 3.0 : f32
  %m1 = arith.constant 7.0 : f32
  %step = arith.constant 0.1 : f32
  %lo = arith.constant -200.0 : f32
  %lanes = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]> : vector<16xf32>
  // Row half (i mod 4) / 2 of element i: offsets m0, m0, m1, m1, ...
  %offsets = arith.constant dense<[3.0, 3.0, 7.0, 7.0, 3.0, 3.0, 7.0, 7.0, 3.0, 3.0, 7.0, 7.0, 3.0, 3.0, 7.0, 7.0]> : vector<16xf32>
  %worst = scf.for %i = %c0 to %n step %c1 iter_args(%w = %zero) -> (f32) {
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %offset = arith.mulf %fi, %step : f32
    %base = arith.addf %lo, %offset : f32
    %b = vector.broadcast %base : f32 to vector<16xf32>
    %s = arith.addf %b, %lanes : vector<16xf32>
    %p = kvpipe.fragment_exp2 %s, %scale, %m0, %m1 {emulated = 3 : i64} : vector<16xf32>
    %c = vector.broadcast %scale : f32 to vector<16xf32>
    %sc = arith.mulf %s, %c : vector<16xf32>
    %x = arith.subf %sc, %offsets : vector<16xf32>
    %exact = math.exp2 %x : vector<16xf32>
    %d = arith.subf %p, %exact : vector<16xf32>
    %r = arith.divf %d, %exact : vector<16xf32>
    %a = math.absf %r : vector<16xf32>
    // Arguments below -125 (the polynomial's 0, exp2's subnormal or 0) are
    // not compared.
    %lim = arith.constant dense<-125.0> : vector<16xf32>
    %inside = arith.cmpf oge, %x, %lim : vector<16xf32>
    %zeros = arith.constant dense<0.0> : vector<16xf32>
    %e = arith.select %inside, %a, %zeros : vector<16xi1>, vector<16xf32>
    %m = vector.reduction <maximumf>, %e : vector<16xf32> into f32
    %next = arith.maximumf %w, %m : f32
    scf.yield %next : f32
  }
  return %worst : f32
}

func.func @main() {
  %tolerance = arith.constant 8.0e-5 : f32
  %all = func.call @worst_error_all() : () -> f32
  %ok_all = arith.cmpf olt, %all, %tolerance : f32
  vector.print %ok_all : i1
  %mixed = func.call @worst_error_mixed() : () -> f32
  %ok_mixed = arith.cmpf olt, %mixed, %tolerance : f32
  vector.print %ok_mixed : i1
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant dense<0xFF800000> : vector<8xf32>
  %z = kvpipe.fragment_exp2 %ninf, %one, %zero, %zero {emulated = 8 : i64} : vector<8xf32>
  vector.print %z : vector<8xf32>
  %ninf16 = arith.constant dense<0xFF800000> : vector<16xf32>
  %z16 = kvpipe.fragment_exp2 %ninf16, %one, %zero, %zero {emulated = 3 : i64} : vector<16xf32>
  vector.print %z16 : vector<16xf32>
  return
}
