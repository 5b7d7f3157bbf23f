/* A C program that embeds kvpipe through libKVPipeCAPI.
 *
 * With MLIR objects: registers the dialects and passes, parses a kvpipe
 * ring, verifies it, lowers it with --kvpipe-to-ptx and prints the result.
 *
 * With text only (kvpipeCompileText): lowers the same ring, writing its PTX
 * to the optional second argument, and compiles IR and pipelines that are
 * wrong, printing the diagnostics the library reports. */
#include "kvpipe-c/Dialects.h"

#include <stdio.h>
#include <stdlib.h>

static void print(MlirStringRef text, void *user) {
  (void)user;
  fwrite(text.data, 1, text.length, stdout);
}

static char *readFile(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(size + 1);
  if (fread(text, 1, size, f) != (size_t)size) {
    fclose(f);
    free(text);
    return NULL;
  }
  text[size] = 0;
  fclose(f);
  return text;
}

/* Compiles `ir` with kvpipeCompileText, both callbacks printing to stdout,
 * then prints whether it succeeded. The output IR comes only on success, so
 * on failure what follows the "output:" heading is the diagnostics. */
static int compileText(const char *label, const char *ir,
                       const char *sourceName, const char *pipeline,
                       int printOutput) {
  printf("== %s\noutput:\n", label);
  MlirLogicalResult result = kvpipeCompileText(
      mlirStringRefCreateFromCString(ir),
      mlirStringRefCreateFromCString(sourceName),
      mlirStringRefCreateFromCString(pipeline), printOutput ? print : NULL,
      print, NULL);
  printf("succeeded: %d\n", mlirLogicalResultIsSuccess(result));
  return mlirLogicalResultIsSuccess(result);
}

/* A kernel declaration: its verifier asks whether gpu.module is a symbol
 * table, a trait whose TypeID kvpipe's code must share with libMLIR. */
static const char *kAttention =
    "gpu.module @kernels [#nvvm.target<chip = \"sm_90a\">] {\n"
    "  kvpipe.attention_kernel @fa {head_dim = 64 : i64, element_type = bf16, "
    "causal = false}\n"
    "}\n";

/* An op that its verifier rejects, on line 3. */
static const char *kBadIR =
    "!pipe = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, "
    "consumers = 1>\n"
    "func.func @f(%p: !pipe) {\n"
    "  kvpipe.consumer_wait %p stage 3 : !pipe\n"
    "  return\n"
    "}\n";

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s FILE.mlir [OUT.ptx]\n", argv[0]);
    return 2;
  }
  char *source = readFile(argv[1]);
  if (!source)
    return 2;
  MlirDialectHandle handle = mlirGetDialectHandle__kvpipe__();
  printf("dialect: %.*s\n", (int)mlirDialectHandleGetNamespace(handle).length,
         mlirDialectHandleGetNamespace(handle).data);

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  kvpipeRegisterAllDialects(registry);
  kvpipeRegisterAllPasses();
  kvpipeRegisterAllPasses(); /* idempotent */
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);

  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(source));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "parse failed\n");
    return 1;
  }
  printf("verified: %d\n", mlirOperationVerify(mlirModuleGetOperation(module)));
  MlirLogicalResult result = kvpipeRunPipeline(
      module, mlirStringRefCreateFromCString("builtin.module(kvpipe-to-ptx)"));
  printf("lowered: %d\n", mlirLogicalResultIsSuccess(result));
  MlirLogicalResult bad = kvpipeRunPipeline(
      module, mlirStringRefCreateFromCString("builtin.module(no-such-pass)"));
  printf("bad pipeline rejected: %d\n", mlirLogicalResultIsFailure(bad));
  mlirOperationPrint(mlirModuleGetOperation(module), print, NULL);
  printf("\n");
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);

  MlirStringRef version = kvpipeGetVersion();
  printf("version: %.*s\n", (int)version.length, version.data);
  int ok = mlirLogicalResultIsSuccess(result);
  ok &= compileText("round trip", source, "", "", 1);
  if (argc == 3) {
    /* The PTX goes to a file; the IR is not wanted (no output callback). */
    char pipeline[4096];
    snprintf(pipeline, sizeof(pipeline),
             "builtin.module(kvpipe-to-ptx{ptx-file=%s})", argv[2]);
    ok &= compileText("to ptx", source, "", pipeline, 0);
  }
  free(source);
  ok &= compileText("attention declaration", kAttention, "", "", 1);
  ok &= !compileText("bad op", kBadIR, "", "", 1);
  ok &= !compileText("named source", kBadIR, "bad.mlir", "", 1);
  ok &= !compileText("syntax error", "func.func @f( {", "", "", 1);
  ok &= !compileText("unknown pass", "module {}", "",
                     "builtin.module(no-such-pass)", 1);
  ok &= !compileText("wrong anchor", "module {}", "", "func.func(cse)", 1);
  ok &= !compileText("no anchor", "module {}", "", "cse", 1);
  /* Nesting is explicit, as in kvpipe-opt's --pass-pipeline. */
  ok &= !compileText("missing nesting", "func.func @f() { return }", "",
                     "builtin.module(affine-loop-invariant-code-motion)", 1);
  ok &= compileText("explicit nesting", "func.func @f() { return }", "",
                    "builtin.module(func.func(affine-loop-invariant-code-"
                    "motion))",
                    1);
  return ok ? 0 : 1;
}
