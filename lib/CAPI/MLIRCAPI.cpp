//===- MLIRCAPI.cpp - MLIR's core C API as a shared library ---------------===//
//
// libKVPipeMLIRCAPI.so is MLIR's core C API: libMLIRCAPIIR.a, linked whole
// (CMakeLists.txt says why it is a library of its own). It has no code of
// its own; CMake needs a source file to make a library.
//
//===----------------------------------------------------------------------===//
