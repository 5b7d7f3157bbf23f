// RUN: kvpipe-opt %s --kvpipe-test-protocol-interface -verify-diagnostics -o /dev/null

// What each pipeline op answers through PipelineProtocolOpInterface: the
// model of the protocol that --kvpipe-verify-protocol, the protocol and
// transaction analyses and the barrier lowering share. A wait opens its
// side's sub-stage on the other side's barrier; an arrival closes it on its
// own; a release returns the state, stepped at the last sub-stage only.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @protocol_ops(%e: i1, %i: index) {
  // Not protocol ops: no remark.
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-remark @below {{side producer, sub-stage 0, barrier producer}}
  %b0 = kvpipe.producer_mbar %p stage 0 : !p
  // expected-remark @below {{side consumer, sub-stage 1, barrier consumer}}
  %c0 = kvpipe.consumer_mbar %p [%i] : !p
  // expected-remark @below {{side producer, sub-stage 0, opens, barrier consumer}}
  kvpipe.producer_acquire %p stage 0 : !p
  // expected-remark @below {{side producer, sub-stage 0, closes, barrier producer}}
  kvpipe.producer_commit %p stage 0 : !p
  // expected-remark @below {{side consumer, sub-stage 0, opens, barrier producer}}
  kvpipe.consumer_wait %p stage 0 : !p
  // expected-remark @below {{side consumer, sub-stage 0, closes, barrier consumer, returns the state advanced by 0}}
  %r0 = kvpipe.consumer_release %p, %e stage 0 : !p
  // The sub-stage defaults to the last one, qk_stages - 1.
  // expected-remark @below {{side consumer, sub-stage 1, closes, barrier consumer, returns the state advanced by 1}}
  %r1 = kvpipe.consumer_release %r0, %e : !p
  // expected-remark @below {{side producer, barrier none, returns the state advanced by 1}}
  %s = kvpipe.step %r1 : !p
  // Not protocol ops: no remark.
  %x = kvpipe.index %s : !p
  %y = kvpipe.phase %s : !p
  return
}
