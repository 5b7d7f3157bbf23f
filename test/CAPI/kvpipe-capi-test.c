/* A C program that embeds kvpipe through libKVPipeCAPI: registers the
 * dialects and passes, parses a kvpipe ring, verifies it, lowers it with
 * --kvpipe-to-ptx and prints the result. */
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

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE.mlir\n", argv[0]);
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
  free(source);
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
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  return mlirLogicalResultIsSuccess(result) ? 0 : 1;
}
