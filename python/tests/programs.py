"""Small kvpipe programs the compiler tests share."""

PIPELINE = "!kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>"

#: Creates a pipeline and steps it twice: parses, verifies and round-trips.
RING = f"""
func.func @ring(%e: i1) -> index {{
  %p = kvpipe.create : {PIPELINE}
  %s0 = kvpipe.step %p : {PIPELINE}
  %s1 = kvpipe.step %p : {PIPELINE}
  %i = kvpipe.index %s1 : {PIPELINE}
  return %i : index
}}
"""
