//===- InitAll.cpp - register kvpipe and what it needs ----------*- C++ -*-===//

#include "kvpipe/InitAll.h"

#include "kvpipe/Conversion/Passes.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"
#include "kvpipe/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void kvpipe::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<kvpipe::KVPipeDialect, mlir::arith::ArithDialect,
                  mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::index::IndexDialect,
                  mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::nvgpu::NVGPUDialect, mlir::scf::SCFDialect,
                  mlir::vector::VectorDialect>();
  // ConvertToLLVMPatternInterface and friends for the upstream dialects, the
  // NVVM target attribute used by gpu-module-to-binary, and the LLVM IR
  // translations it runs to produce PTX.
  mlir::registerAllExtensions(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
}

void kvpipe::registerAllPasses() {
  registerKVPipeTransformsPasses();
  registerKVPipeConversionPasses();
  registerKVPipePipelines();
}
