!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>
func.func @f(%e: i1, %i: index) -> (index, i1) {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %b = kvpipe.producer_mbar %p stage 0 : !p
  %c = kvpipe.consumer_mbar %p [%i] : !p
  kvpipe.producer_acquire %p stage 0 : !p
  kvpipe.producer_commit %p : !p
  kvpipe.consumer_wait %p stage 1 : !p
  %p1 = kvpipe.consumer_release %p, %e stage 1 : !p
  %p2 = kvpipe.step %p1 : !p
  %x = kvpipe.index %p2 : !p
  %y = kvpipe.phase %p2 : !p
  return %x, %y : index, i1
}
