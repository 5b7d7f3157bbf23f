"""vLLM's attention call per layer and step, kvpipe against FlashAttention-4 in one process:
packed queries over a paged cache with the key counts as seqused_k
(kvpipe.vllm_flash_attn.flash_attn_varlen_func, as vLLM's FlashAttention backend calls it,
into its out= buffer; FA4's flash_attn_varlen_func with page_table=). Llama-3-8B's heads
(32 / 8 of 128), bf16, bottom-right causal, pages of 16 (vLLM's default) and 64, a shuffled
block table. Each row checks that kvpipe's and FA4's outputs agree (max |diff|; kvpipe's own
correctness is `check --paged`), then times both in interleaved rounds (bench.interleaved_ms):
ms per call and TB/s of the K/V the step reads.

    python3 scripts/gpu/vllm-step.py --compile   # here: the kernels into the cache
    python3 scripts/gpu/vllm-step.py             # on the GPU machine (FA4 staged: a column)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from gpu_script import arguments  # noqa: E402

from kvpipe.check_paged import PagedVarlenCase, paged_varlen_kernel_configs  # noqa: E402

HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
PAGE_SIZES = (16, 64)
#: (name, query counts, key counts) of a step's sequences.
STEPS = [
    ("64 decodes of 4k", (1,) * 64, (4096,) * 64),
    ("8 decodes of 32k", (1,) * 8, (32768,) * 8),
    ("32 decodes of 8k + a 2k chunk after 6k", (1,) * 32 + (2048,), (8192,) * 33),
    ("4 chunks of 2k after 6k", (2048,) * 4, (8192,) * 4),
]


def cases():
    return [PagedVarlenCase(HEAD_DIM, page, HEADS_Q, HEADS_KV, lengths_q, lengths_k,
                            seqused=True, interface="vllm")
            for page in PAGE_SIZES for _, lengths_q, lengths_k in STEPS]


def fa4_varlen():
    try:
        from flash_attn.cute import flash_attn_varlen_func
    except Exception:  # noqa: BLE001 -- not staged, or its libraries are missing
        return None
    return flash_attn_varlen_func


def main() -> int:
    args = arguments(__doc__, lambda: paged_varlen_kernel_configs(cases()),
                     lambda p: p.add_argument("--rounds", type=int, default=7))
    if args is None:
        return 0

    import torch

    from kvpipe.bench import interleaved_ms
    from kvpipe.vllm_flash_attn import flash_attn_varlen_func

    fa4 = fa4_varlen()
    print(f"FA4: {'flash_attn.cute' if fa4 else 'not staged'}")
    print("| step | page | kvpipe ms | FA4 ms | kvpipe TB/s | FA4 TB/s | kvpipe/FA4 | "
          "max abs diff |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    for page in PAGE_SIZES:
        for name, lengths_q, lengths_k in STEPS:
            torch.manual_seed(0)
            batch = len(lengths_q)
            pages_per_sequence = max(lengths_k) // page
            num_pages = batch * pages_per_sequence
            k_cache, v_cache = (torch.randn(num_pages, page, HEADS_KV, HEAD_DIM,
                                            dtype=torch.bfloat16, device="cuda")
                                for _ in range(2))
            table = torch.randperm(num_pages, device="cuda").to(torch.int32).view(
                batch, pages_per_sequence)
            offsets = [0]
            for n in lengths_q:
                offsets.append(offsets[-1] + n)
            q = torch.randn(offsets[-1], HEADS_Q, HEAD_DIM, dtype=torch.bfloat16,
                            device="cuda")
            cu_q = torch.tensor(offsets, dtype=torch.int32, device="cuda")
            used = torch.tensor(lengths_k, dtype=torch.int32, device="cuda")
            out = torch.empty_like(q)
            max_q, max_k = max(lengths_q), max(lengths_k)

            def kvpipe_step():
                return flash_attn_varlen_func(
                    q, k_cache, v_cache, max_q, cu_q, max_k, seqused_k=used,
                    block_table=table, causal=True, out=out, fa_version=3)

            columns = [("kvpipe", kvpipe_step)]
            diff = None
            if fa4 is not None:
                def fa4_step():
                    return fa4(q, k_cache, v_cache, cu_seqlens_q=cu_q, seqused_k=used,
                               page_table=table, max_seqlen_q=max_q, max_seqlen_k=max_k,
                               causal=True)
                columns.append(("fa4", fa4_step))
                try:
                    theirs = fa4_step()
                    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
                    diff = float((kvpipe_step().float() - theirs.float()).abs().max())
                except Exception as exc:  # noqa: BLE001 -- a peer's failure is an entry
                    print(f"FA4 failed ({name}, page {page}): {exc}"[:300], flush=True)
            ms = interleaved_ms(columns, args.rounds, optional=("fa4",))
            read = 2 * sum(lengths_k) * HEADS_KV * HEAD_DIM * 2

            def tbps(t):
                return None if t is None else round(read / (t * 1e-3) / 1e12, 2)

            ours, theirs_ms = ms["kvpipe"], ms.get("fa4")
            ratio = round(theirs_ms / ours, 3) if theirs_ms else None
            print(f"| {name} | {page} | {ours:.4f} | "
                  f"{'None' if theirs_ms is None else f'{theirs_ms:.4f}'} | {tbps(ours)} | "
                  f"{tbps(theirs_ms)} | {ratio} | {diff} |", flush=True)
            del k_cache, v_cache, table, q, out
    return 0


if __name__ == "__main__":
    sys.exit(main())
