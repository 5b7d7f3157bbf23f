/* The smallest C embedding: parses a kernel with MLIR's C API, lowers it
 * with kvpipe's --kvpipe-to-ptx, writing the PTX to a file, and says
 * whether that worked. Everything comes from kvpipe-c/Dialects.h (which
 * includes MLIR's C headers) and KVPipe::KVPipeCAPI. */
#include "kvpipe-c/Dialects.h"

#include <stdio.h>
#include <stdlib.h>

static char *readFile(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(size + 1);
  if (text && fread(text, 1, size, f) != (size_t)size) {
    free(text);
    text = NULL;
  }
  if (text)
    text[size] = 0;
  fclose(f);
  return text;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FILE.mlir OUT.ptx\n", argv[0]);
    return 2;
  }
  char *source = readFile(argv[1]);
  if (!source) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  kvpipeRegisterAllDialects(registry);
  kvpipeRegisterAllPasses();
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);

  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(source));
  free(source);
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "parse failed\n");
    return 1;
  }
  char pipeline[4096];
  snprintf(pipeline, sizeof(pipeline),
           "builtin.module(kvpipe-to-ptx{ptx-file=%s})", argv[2]);
  MlirLogicalResult result =
      kvpipeRunPipeline(module, mlirStringRefCreateFromCString(pipeline));
  printf("lowered: %d\n", mlirLogicalResultIsSuccess(result));
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  return mlirLogicalResultIsSuccess(result) ? 0 : 1;
}
