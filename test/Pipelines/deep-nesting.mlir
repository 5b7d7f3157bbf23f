// Input nested deeper than the parser's stack can take is refused with a
// located error before the parser recurses (200,000 nested '[' used to
// segfault kvpipe-opt, and through the C API kill the embedding process).

// RUN: %python -c "print('func.func @f() attributes {a = ' + '[' * 200000 + ']' * 200000 + '} { return }')" > %t.deep.mlir
// RUN: not kvpipe-opt %t.deep.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: deep.mlir:1:1031: error: input nests brackets more than 1000 levels deep; kvpipe refuses to parse it

// Types nest through '<' too; '->' and comparisons do not close anything.
// RUN: %python -c "print('func.func @f(%%a: ' + 'vector<2x' * 5000 + 'f32' + '>' * 5000 + ') { return }')" > %t.types.mlir
// RUN: not kvpipe-opt %t.types.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=TYPES
// TYPES: types.mlir:1:9015: error: input nests brackets more than 1000 levels deep

// Brackets inside strings and comments do not count, and nesting below the
// limit parses as before.
// RUN: %python -c "print('// ' + '[' * 5000); print('func.func @f() attributes {s = \"' + '[' * 5000 + '\", a = ' + '[' * 900 + ']' * 900 + '} { return }')" > %t.ok.mlir
// RUN: kvpipe-opt %t.ok.mlir | FileCheck %s --check-prefix=OK
// OK: func.func @f() attributes {a = {{\[\[\[}}

// This file's own arrows and affine sets parse.
// RUN: kvpipe-opt %s | FileCheck %s --check-prefix=SELF
// SELF: affine_set<(d0) : (d0 - 1 >= 0)>
func.func @arrows(%x: index) -> index attributes {set = affine_set<(d0) : (d0 - 1 >= 0)>} {
  return %x : index
}
