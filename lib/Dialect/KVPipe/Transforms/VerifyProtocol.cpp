//===- VerifyProtocol.cpp - check the producer/consumer protocol ----------===//
//
// A pipeline that breaks its protocol does not fail on the GPU: it hangs, or
// it reads a slot the producer is overwriting. This pass finds, statically,
// the mistakes that cause either (Passes.td lists them) and reports each at
// the offending op, naming the pipeline and the sub-stage, with notes at the
// ops it conflicts with. It changes nothing.
//
// The rules, in the order they are checked:
//   1. linear use: a state is advanced at most once and not used after;
//   2. balance: the producer and consumer loops of a pipeline advance it by
//      the same number of slots;
//   3. pairing: wait/release and acquire/commit pairs in one block, in
//      sub-stage order, and branches that advance alike;
//   4. release after retire: no release of a slot a wgmma still reads;
//   5. transactions: expect_tx bytes match the loads, every load on a
//      producer barrier is expected by a commit;
//   6. barriers: one kvpipe.init per kvpipe.create, by the whole CTA, before
//      any other use;
//   7. flow: every state comes from and goes to ops the analysis models, no
//      state is passed twice, loops carry their own states;
//   8. totals: each side advances the pipeline by the same number of slots
//      from its creation, compared symbolically;
//   9. reads: a wgmma reads a slot only after a consumer_wait of it;
//  10. aliases of slots: a buffer that overlaps a slot at an offset not
//      computed from a kvpipe.index accesses that slot, and an address taken
//      out of a memref that may overlap a ring is unproven;
//  11. readers covered: every thread that reads a slot arrives on its
//      release, or an arriving thread is ordered after its reads (rule 6);
//  12. rings apart: the rings TMA and cp.async fill share no bytes with
//      another ring;
//  13. no wait-for cycle: no commit or release waits, through the waits its
//      threads run before it, for itself (a deadlock across pipelines).
//
// What a rule cannot decide is reported as a warning that starts with
// "cannot prove" (an error with `strict`): silence means proven. The
// contract, and its assumptions, are in docs/protocol-checking.md.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"

namespace kvpipe {
#define GEN_PASS_DEF_VERIFYPROTOCOL
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;
using kvpipe::detail::ProtocolChecker;

namespace {

struct VerifyProtocol : kvpipe::impl::VerifyProtocolBase<VerifyProtocol> {
  using Base::Base;

  void runOnOperation() override {
    ProtocolChecker checker(getOperation(), strict);
    if (!checker.run())
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
