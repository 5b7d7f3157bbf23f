//===- InputLimits.cpp - limits checked before parsing input --------------===//

#include "kvpipe/Support/InputLimits.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

LogicalResult kvpipe::checkInputNesting(llvm::MemoryBufferRef buffer,
                                        llvm::raw_ostream &errors,
                                        unsigned maxDepth) {
  if (isBytecode(buffer))
    return success();
  StringRef text = buffer.getBuffer();
  unsigned depth = 0;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    char next = i + 1 < e ? text[i + 1] : '\0';
    switch (c) {
    case '"': // A string literal: brackets inside do not nest.
      for (++i; i < e && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    case '/':
      if (next == '/')
        i = std::min(text.find('\n', i), e);
      continue;
    case '<':
      if (next == '=') // `<=` in an integer set
        continue;
      [[fallthrough]];
    case '(':
    case '[':
    case '{':
      if (++depth <= maxDepth)
        continue;
      break;
    case '>':
      // `->` is an arrow and `>=` a comparison, not closing brackets.
      if ((i > 0 && text[i - 1] == '-') || next == '=')
        continue;
      [[fallthrough]];
    case ')':
    case ']':
    case '}':
      // Unbalanced closers are the parser's to report, not this check's.
      if (depth > 0)
        --depth;
      continue;
    default:
      continue;
    }
    // Nested too deep: report at this bracket, before the parser recurses.
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(buffer),
                                 llvm::SMLoc());
    sourceMgr.PrintMessage(
        errors, llvm::SMLoc::getFromPointer(text.data() + i),
        llvm::SourceMgr::DK_Error,
        "input nests brackets more than " + llvm::Twine(maxDepth) +
            " levels deep; kvpipe refuses to parse it (the parser would "
            "recurse once per level and could overflow the stack)");
    return failure();
  }
  return success();
}
