// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-to-ptx=verify-protocol=false -split-input-file -verify-diagnostics -o /dev/null

// Regression (found by tools/fuzz/kvpipe_fuzz.py): an llvm.inline_asm whose
// constraint string NVPTX cannot print ("l,r,r,~": a clobber without its
// braces) failed in the AsmPrinter without a location ("invalid operand in
// inline asm"). Each constraint is checked at the op: well formed, a code
// NVPTX knows, one input constraint per operand, ties to outputs that exist,
// and the string's $N naming an operand.

gpu.module @m {
  gpu.func @k(%g: !llvm.ptr<1>, %i: i32) kernel {
    // expected-error @+1 {{'llvm.inline_asm' op has the constraint '~', which NVPTX cannot emit: a clobber must be '~{name}'}}
    llvm.inline_asm has_side_effects "st.global.u32 [$0], $1;", "l,r,~" %g, %i : (!llvm.ptr<1>, i32) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%g: !llvm.ptr<1>, %i: i32) kernel {
    // expected-error @+1 {{'llvm.inline_asm' op has the constraint 'z', which NVPTX cannot emit: 'z' is no NVPTX constraint (b c h r l f d q N, i n m X, a digit or '{reg}')}}
    llvm.inline_asm has_side_effects "st.global.u32 [$0], $1;", "l,z" %g, %i : (!llvm.ptr<1>, i32) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%g: !llvm.ptr<1>, %i: i32) kernel {
    // expected-error @+1 {{'llvm.inline_asm' op has 1 input constraint(s) for its 2 operand(s)}}
    llvm.inline_asm has_side_effects "st.global.u32 [$0], $1;", "l" %g, %i : (!llvm.ptr<1>, i32) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%g: !llvm.ptr<1>, %i: i32) kernel {
    // expected-error @+1 {{'llvm.inline_asm' op has the constraint '=', which NVPTX cannot emit: it names no operand kind}}
    %r = llvm.inline_asm "mov.u32 $0, $1;", "=,r" %i : (i32) -> i32
    gpu.return
  }
}

// -----

// Regression (the fuzzer, mutating the case below): operand numbers past
// the operands made NVPTX crash (a segfault in the AsmPrinter).
gpu.module @m {
  gpu.func @k(%i: i32) kernel {
    // expected-error @+1 {{'llvm.inline_asm' op has the constraint '8', which ties to an output it does not have (1 output(s))}}
    %r = llvm.inline_asm "add.u32 $0, $1, 2;", "=&r,8" %i : (i32) -> i32
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%f: f32) kernel {
    // expected-error @+1 {{'llvm.inline_asm' op refers to operand $8, but has 2 (outputs, then inputs)}}
    %t = llvm.inline_asm "tanh.approx.f32 $8, ${1:x} $$;", "=f,f" %f : (f32) -> f32
    gpu.return
  }
}

// -----

// Well-formed constraints pass: outputs, early clobbers, ties, clobbers.
gpu.module @m {
  gpu.func @k(%g: !llvm.ptr<1>, %i: i32, %f: f32) kernel {
    %r = llvm.inline_asm "add.u32 $0, $1, 1;", "=&r,0" %i : (i32) -> i32
    %t = llvm.inline_asm "tanh.approx.f32 $0, $1;", "=f,f" %f : (f32) -> f32
    llvm.inline_asm has_side_effects "st.global.u32 [$0], $1;", "l,r,~{memory}" %g, %r : (!llvm.ptr<1>, i32) -> ()
    gpu.return
  }
}
