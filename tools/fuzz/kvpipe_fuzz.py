#!/usr/bin/env python3
"""Mutation fuzzer for kvpipe-opt over the project's own test inputs.

The corpus is every .mlir file under test/ and examples/ (files that say
`REQUIRES: gpu` are skipped), split at `// -----` into separate inputs
without their comments, plus the expanded form (--kvpipe-expand-attention)
of every input that declares an attention kernel. Most mutants start from
an input that verifies as it is.

A mutant applies one to four mutations, drawn either from the wild set
(integer literals replaced by boundary values and values just above
hardware limits, `stage N`, swizzles, element types, memref shapes, layouts
and address spaces, vector sizes including scalable ones, pipeline and
attention-kernel parameters, protocol ops swapped, lines deleted,
duplicated or swapped, tokens deleted, operand names swapped, attributes
removed or added, lines spliced in from other inputs) or from the gentle
set (plausible values applied consistently across the input, so that the
mutant often still verifies and reaches the lowering with a configuration
the tests do not have).

Every mutant runs through kvpipe-opt in two modes:

  verify  parse + verify + --kvpipe-verify-protocol
  full    --kvpipe-to-ptx (with a random choice of pipeline options), for a
          mutant that verifies; an input without a gpu.module is wrapped in
          one so that the lowering sees its ops. A mutant that is valid IR
          but breaks the protocol runs with verify-protocol=false.

kvpipe-opt must answer every input with exit code 0, or 1 and a diagnostic
with a location. A crash is a signal, another exit code, or an LLVM crash
banner on stderr ("PLEASE submit a bug report", "LLVM ERROR", "Assertion",
"Stack dump", "UNREACHABLE"); a run past the timeout is a hang; exit code 1
without a located error is an unlocated diagnostic. Each is saved under
--crash-dir with the command and its stderr (the first crash of each kind
minimised by deleting lines while it still crashes the same way). Crashes
in the installed MLIR/LLVM libraries that kvpipe cannot fix (KNOWN_UPSTREAM)
are reported and saved but do not fail the run. The exit code is 1 when
anything crashed, 2 when something hung, 3 for unlocated diagnostics, 0
otherwise.

Mutant N of a seed is the same on every machine: --dump-mutant N prints it.

  python3 tools/fuzz/kvpipe_fuzz.py --seconds 600 --jobs 8 --crash-dir /tmp/crashes
"""

import argparse
import concurrent.futures
import hashlib
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CRASH_MARKERS = ("PLEASE submit a bug report", "LLVM ERROR", "Assertion",
                 "Stack dump", "UNREACHABLE")

# Integer values at and around the edges this dialect and the hardware have:
# signed/unsigned 32- and 64-bit limits, the 32-slot ring, the 256-element TMA
# box, the 227 KiB of shared memory, 20-bit arrival counts, wgmma's N.
BOUNDARY_INTS = [
    0, -1, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65,
    96, 127, 128, 129, 192, 255, 256, 257, 264, 512, 1024, 4096, 65535, 65536,
    232448, 232449, 1048575, 1048576, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
    2**62, 2**63 - 1, 2**63, 2**64, -2**31, -2**31 - 1, -2**63, 10**30,
]
STAGE_VALUES = [0, 1, 2, 3, 4, 7, 31, 32, 33, -1, 2**31 - 1, 2**31, 2**32 - 1,
                2**32]
SWIZZLE_VALUES = [0, 1, 16, 32, 48, 64, 96, 128, 256, -128, 2**31, 2**63 - 1]
ELEMENT_TYPES = ["bf16", "f16", "f32", "i8", "f64", "i1", "i16", "i32", "i64",
                 "index", "f8E4M3FN", "tf32", "i4", "f80", "complex<f32>"]
ADDRESS_SPACES = ["#gpu.address_space<workgroup>", "#gpu.address_space<global>",
                  "#gpu.address_space<private>", "3", "1", "5", "7",
                  "\"shared\""]
LAYOUTS = ["strided<[64, 1], offset: ?>", "strided<[?, 1]>",
           "strided<[1, 64]>", "strided<[8192, 64, 1], offset: 8>",
           "strided<[64, 1], offset: 4611686018427387904>",
           "strided<[128, 1]>", "strided<[4096, 64, 1]>",
           "affine_map<(d0, d1) -> (d1, d0)>", "strided<[0, 0]>",
           "strided<[9223372036854775807, 1]>"]
PIPELINE_PARAMS = ("kv_stages", "qk_stages", "producers", "consumers")
ATTENTION_ATTRS = {
    "head_dim": [0, 32, 64, 96, 128, 256, -64, 2**31],
    "block_n": [0, 16, 32, 48, 64, 112, 128, 176, 192, 240, 256, 272, 2**31],
    "kv_stages": [0, 1, 2, 3, 4, 5, 8, 9, 33, 2**31, 2**63 - 1],
    "consumer_warpgroups": [0, 1, 2, 3, 4, -1, 2**31],
    "producer_registers": [0, 8, 16, 24, 32, 56, 240, 248, 256, 264, 2**31],
    "consumer_registers": [0, 24, 160, 232, 240, 248, 256, 264, 2**31],
}
BOOL_ATTENTION_ATTRS = ("overlap_softmax", "pingpong", "causal")
PROTOCOL_OPS = ["producer_acquire", "producer_commit", "consumer_wait"]
STAGED_OPS = PROTOCOL_OPS + ["producer_mbar"]
OTHER_ATTRS = ["{swizzle = 128}", "{swizzle = 64, transpose_b}",
               "{swizzle = 32}", "{transpose_b}", "{pending = 0}",
               "{pending = 7}", "{pending = 8}", "{pending = -1}",
               "{qk_stage = 5 : i32}", "{qk_stage = -1 : i32}",
               "{kvpipe.transaction_bytes = 0 : i64}",
               "{kvpipe.transaction_bytes = 4294967296 : i64}"]

INT_RE = re.compile(r"(?<![\w%#@^.$-])-?\d+(?![\w.])")
SHAPED_RE = re.compile(r"\b(memref|vector|tensor)<([^<>]*(?:<[^<>]*(?:<[^<>]*>)?[^<>]*>)?[^<>]*)>")
DIM_RE = re.compile(r"(?<![\w\[])(\d+|\?)x")
TYPE_RE = re.compile(r"\b(bf16|f16|f32|f64|i1|i8|i16|i32|i64|index|tf32)\b")
VECTOR_RE = re.compile(r"vector<(\d+)x")
SWIZZLE_RE = re.compile(r"\bswizzle = (-?\d+)")
STAGE_RE = re.compile(r"\bstage (-?\d+)")
PARAM_RE = re.compile(r"\b(%s) = (-?\d+)" % "|".join(PIPELINE_PARAMS))
ATTN_RE = re.compile(r"\b(%s) = (-?\d+)" % "|".join(ATTENTION_ATTRS))
ADDR_RE = re.compile(r"#gpu\.address_space<\w+>")
VALUE_RE = re.compile(r"%[\w.$-]+")
ATTR_DICT_RE = re.compile(r"\s*\{[^{}\n]*\}")
ATTR_ENTRY_RE = re.compile(r"\b\w+ = [^,{}]+(, )?")
STAGED_RE = re.compile(r"(kvpipe\.(?:%s) %%[\w.$-]+)( :)" % "|".join(STAGED_OPS))
PROTOCOL_RE = re.compile(r"kvpipe\.(%s)\b" % "|".join(PROTOCOL_OPS))
ATTN_OP_RE = re.compile(r"(kvpipe\.attention_kernel @\w+ \{)")


# ---------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------

def split_inputs(text):
    """The inputs of a test file: its `// -----` chunks without comments."""
    inputs = []
    for chunk in re.split(r"^// -----\s*$", text, flags=re.M):
        lines = [line for line in chunk.splitlines()
                 if line.strip() and not line.lstrip().startswith("//")]
        if lines:
            inputs.append("\n".join(lines) + "\n")
    return inputs


def load_corpus(root):
    corpus = []
    files = 0
    for top in ("test", "examples"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(".mlir"):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                if "REQUIRES: gpu" in text:
                    continue
                files += 1
                rel = os.path.relpath(path, root)
                for i, chunk in enumerate(split_inputs(text)):
                    corpus.append(("%s#%d" % (rel, i), chunk))
    return corpus, files


def expand_attention_seeds(corpus, opt, timeout):
    """The generated kernels of the corpus's attention declarations: large,
    realistic kvpipe programs to mutate."""
    seeds = []
    for name, text in corpus:
        if "kvpipe.attention_kernel" not in text:
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".mlir",
                                         delete=False) as f:
            f.write(text)
        try:
            proc = subprocess.run([opt, f.name, "--kvpipe-expand-attention"],
                                  capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            continue
        finally:
            os.unlink(f.name)
        if proc.returncode == 0 and "gpu.func" in proc.stdout:
            seeds.append((name + ":expanded", proc.stdout))
    return seeds


# ---------------------------------------------------------------------------
# Mutations: each takes (rng, text, corpus) and returns the new text, or None
# when it does not apply.
# ---------------------------------------------------------------------------

def replace_match(text, match, group, value):
    start, end = match.span(group)
    return text[:start] + str(value) + text[end:]


def pick_match(rng, regex, text):
    matches = list(regex.finditer(text))
    return rng.choice(matches) if matches else None


def boundary_int(rng, value):
    r = rng.random()
    if r < 0.7:
        return rng.choice(BOUNDARY_INTS)
    if r < 0.85:
        return rng.choice([value + 1, value - 1, value * 2, value // 2, -value])
    return rng.randrange(-2**64, 2**64)


def m_int(rng, text, corpus):
    m = pick_match(rng, INT_RE, text)
    if not m:
        return None
    return replace_match(text, m, 0, boundary_int(rng, int(m.group(0))))


def m_stage(rng, text, corpus):
    m = pick_match(rng, STAGE_RE, text)
    if m and rng.random() < 0.7:
        return replace_match(text, m, 1, rng.choice(STAGE_VALUES))
    m = pick_match(rng, STAGED_RE, text)
    if not m:
        return None
    return (text[:m.end(1)] + " stage %d" % rng.choice(STAGE_VALUES) +
            text[m.end(1):])


def m_swizzle(rng, text, corpus):
    m = pick_match(rng, SWIZZLE_RE, text)
    if not m:
        return None
    return replace_match(text, m, 1, rng.choice(SWIZZLE_VALUES))


def m_element_type(rng, text, corpus):
    m = pick_match(rng, TYPE_RE, text)
    if not m:
        return None
    new = rng.choice(ELEMENT_TYPES)
    if rng.random() < 0.3:
        # Every occurrence of the type: keeps the program consistent, so the
        # change reaches the checks that compare types across ops.
        return re.sub(r"\b%s\b" % re.escape(m.group(1)), new, text)
    return replace_match(text, m, 1, new)


def split_top(body):
    """Splits a shaped type's body at its top-level commas."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(body):
        if c in "<[(":
            depth += 1
        elif c in ">])":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:i].strip())
            start = i + 1
    parts.append(body[start:].strip())
    return parts


def m_shape(rng, text, corpus):
    m = pick_match(rng, SHAPED_RE, text)
    if not m:
        return None
    body = m.group(2)
    dims = list(DIM_RE.finditer(body))
    r = rng.random()
    if dims and r < 0.6:
        d = rng.choice(dims)
        old = d.group(1)
        n = int(old) if old != "?" else 64
        new = rng.choice([0, 1, 2, "?", n * 2, max(n // 2, 1), n + 8, 3, 7,
                          9, 257, 1024, 2**31, 2**40, 2**62])
        body = body[:d.start(1)] + str(new) + body[d.end(1):]
    elif dims and r < 0.7:
        d = rng.choice(dims)
        body = body[:d.start()] + body[d.end():]
    elif r < 0.8:
        body = "%sx%s" % (rng.choice([1, 2, 4, 0, "?"]), body)
    else:
        # Layout: add or replace the one before the memory space.
        parts = split_top(body)
        rest = [p for p in parts[1:] if not p.startswith(("strided", "affine"))]
        body = ", ".join([parts[0], rng.choice(LAYOUTS)] + rest)
    # Keep it consistent across the file with some probability: a type alias
    # or a repeated type then changes everywhere.
    old_type = m.group(0)
    new_type = "%s<%s>" % (m.group(1), body)
    if rng.random() < 0.4:
        return text.replace(old_type, new_type)
    return text[:m.start()] + new_type + text[m.end():]


def m_address_space(rng, text, corpus):
    m = pick_match(rng, ADDR_RE, text)
    if not m:
        return None
    new = rng.choice(ADDRESS_SPACES + [""])
    start, end = m.span()
    if not new:
        # Drop it, with its separating comma.
        if text[start - 2:start] == ", ":
            start -= 2
        return text[:start] + text[end:]
    if rng.random() < 0.4:
        return text.replace(m.group(0), new)
    return text[:start] + new + text[end:]


def m_vector(rng, text, corpus):
    m = pick_match(rng, VECTOR_RE, text)
    if not m:
        return None
    n = int(m.group(1))
    if rng.random() < 0.15:
        # Scalable: no fixed number of registers.
        new = "vector<[%d]x" % rng.choice([n, 4, 32])
        if rng.random() < 0.4:
            return text.replace(m.group(0), new)
        return text[:m.start()] + new + text[m.end():]
    new = rng.choice([0, 1, 2, 4, 8, 16, 32, 63, 64, 65, 96, 128, 129, 256,
                      n * 2, max(n // 2, 1), 2**20, 2**31])
    if rng.random() < 0.4:
        return text.replace(m.group(0), "vector<%dx" % new)
    return replace_match(text, m, 1, new)


def m_pipeline_param(rng, text, corpus):
    m = pick_match(rng, PARAM_RE, text)
    if not m:
        return None
    new = rng.choice([0, 1, 2, 3, 4, 8, 16, 31, 32, 33, 64, -1, 1048575,
                      1048576, 2**31, 2**32 + 1, 2**63 - 1])
    return replace_match(text, m, 2, new)


def m_attention(rng, text, corpus):
    m = pick_match(rng, ATTN_RE, text)
    if m and rng.random() < 0.6:
        return replace_match(text, m, 2,
                             rng.choice(ATTENTION_ATTRS[m.group(1)]))
    m = pick_match(rng, ATTN_OP_RE, text)
    if not m:
        return None
    name = rng.choice(list(ATTENTION_ATTRS) + list(BOOL_ATTENTION_ATTRS))
    if name in BOOL_ATTENTION_ATTRS:
        value = rng.choice(["true", "false", "1 : i64", "unit"])
    else:
        value = "%d : %s" % (rng.choice(ATTENTION_ATTRS[name]),
                             rng.choice(["i64", "i64", "i32", "i8"]))
    return text[:m.end(1)] + "%s = %s, " % (name, value) + text[m.end(1):]


def m_protocol_op(rng, text, corpus):
    m = pick_match(rng, PROTOCOL_RE, text)
    if not m:
        return None
    return replace_match(text, m, 1, rng.choice(PROTOCOL_OPS))


def lines_of(text):
    return text.splitlines()


def join(lines):
    return "\n".join(lines) + "\n"


def m_delete_line(rng, text, corpus):
    lines = lines_of(text)
    if len(lines) < 2:
        return None
    i = rng.randrange(len(lines))
    n = 1 if rng.random() < 0.8 else rng.randint(2, 4)
    del lines[i:i + n]
    return join(lines)


def m_duplicate_line(rng, text, corpus):
    lines = lines_of(text)
    if not lines:
        return None
    i = rng.randrange(len(lines))
    j = rng.randrange(len(lines) + 1)
    lines.insert(j, lines[i])
    return join(lines)


def m_swap_lines(rng, text, corpus):
    lines = lines_of(text)
    if len(lines) < 2:
        return None
    i = rng.randrange(len(lines))
    j = i + 1 if rng.random() < 0.6 and i + 1 < len(lines) else \
        rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return join(lines)


def m_delete_token(rng, text, corpus):
    tokens = list(re.finditer(r"[^\s,()\[\]{}<>:]+|[,()\[\]{}<>:]", text))
    if not tokens:
        return None
    t = rng.choice(tokens)
    return text[:t.start()] + text[t.end():]


def m_swap_operands(rng, text, corpus):
    uses = list(VALUE_RE.finditer(text))
    names = sorted({u.group(0) for u in uses})
    if len(names) < 2:
        return None
    u = rng.choice(uses)
    if rng.random() < 0.5:
        # Swap two operands of one line.
        start = text.rfind("\n", 0, u.start()) + 1
        end = text.find("\n", u.end())
        end = len(text) if end < 0 else end
        on_line = [v for v in uses if start <= v.start() < end and v is not u]
        if on_line:
            v = rng.choice(on_line)
            a, b = sorted([u, v], key=lambda x: x.start())
            return (text[:a.start()] + b.group(0) + text[a.end():b.start()] +
                    a.group(0) + text[b.end():])
    new = rng.choice([n for n in names if n != u.group(0)])
    return text[:u.start()] + new + text[u.end():]


def m_remove_attribute(rng, text, corpus):
    r = rng.random()
    if r < 0.35:
        m = pick_match(rng, ATTR_DICT_RE, text)
        if m:
            return text[:m.start()] + text[m.end():]
    if r < 0.7:
        dicts = list(re.finditer(r"\{[^{}\n]*\}", text))
        entries = [(d, e) for d in dicts
                   for e in ATTR_ENTRY_RE.finditer(d.group(0))]
        if entries:
            d, e = rng.choice(entries)
            return (text[:d.start() + e.start()] + text[d.start() + e.end():])
    m = pick_match(rng, re.compile(
        r" (kernel|transpose_b|stage -?\d+|multicast %[\w.]+|workgroup\([^()]*\))"),
        text)
    if not m:
        return None
    return text[:m.start()] + text[m.end():]


def m_add_attribute(rng, text, corpus):
    m = pick_match(rng, re.compile(r"kvpipe\.\w+ [^\n:{]*?( :)"), text)
    if not m:
        return None
    return text[:m.start(1)] + " " + rng.choice(OTHER_ATTRS) + text[m.start(1):]


def m_splice(rng, text, corpus):
    _, other = rng.choice(corpus)
    other_lines = lines_of(other)
    lines = lines_of(text)
    if not other_lines:
        return None
    i = rng.randrange(len(other_lines))
    n = 1 if rng.random() < 0.6 else rng.randint(2, 6)
    j = rng.randrange(len(lines) + 1)
    lines[j:j] = other_lines[i:i + n]
    return join(lines)


# (mutation, weight): the targeted mutations first.
MUTATIONS = [
    (m_int, 10), (m_stage, 6), (m_swizzle, 5), (m_element_type, 6),
    (m_shape, 8), (m_address_space, 3), (m_vector, 4), (m_pipeline_param, 5),
    (m_attention, 6), (m_protocol_op, 3), (m_delete_line, 6),
    (m_duplicate_line, 4), (m_swap_lines, 4), (m_delete_token, 4),
    (m_swap_operands, 5), (m_remove_attribute, 4), (m_add_attribute, 3),
    (m_splice, 4),
]
MUTATION_FUNCS = [f for f, _ in MUTATIONS]
MUTATION_WEIGHTS = [w for _, w in MUTATIONS]


# ---------------------------------------------------------------------------
# Gentle mutations: plausible values, applied consistently across the input,
# so that the mutant often still verifies and reaches the lowering with a
# configuration the tests do not have.
# ---------------------------------------------------------------------------

def everywhere_or_once(rng, text, m, group, value):
    if rng.random() < 0.6:
        old = m.group(0)
        new = old[:m.start(group) - m.start()] + str(value) + \
            old[m.end(group) - m.start():]
        return text.replace(old, new)
    return replace_match(text, m, group, value)


def g_int(rng, text, corpus):
    m = pick_match(rng, INT_RE, text)
    if not m:
        return None
    v = int(m.group(0))
    new = rng.choice([v * 2, v // 2, v + 8, v - 8, v + 16, v + 1, 0, 1, 2, 4,
                      8, 16, 32, 64, 128, 256])
    return everywhere_or_once(rng, text, m, 0, new)


def g_stage(rng, text, corpus):
    m = pick_match(rng, STAGE_RE, text)
    if m and rng.random() < 0.7:
        return replace_match(text, m, 1, rng.choice([0, 1, 2, 3]))
    m = pick_match(rng, STAGED_RE, text)
    if not m:
        return None
    return (text[:m.end(1)] + " stage %d" % rng.choice([0, 1, 2]) +
            text[m.end(1):])


def g_swizzle(rng, text, corpus):
    m = pick_match(rng, SWIZZLE_RE, text)
    if not m:
        return None
    return everywhere_or_once(rng, text, m, 1, rng.choice([0, 32, 64, 128]))


def g_element_type(rng, text, corpus):
    half = re.compile(r"\b(bf16|f16)\b")
    m = pick_match(rng, half if rng.random() < 0.7 else TYPE_RE, text)
    if not m:
        return None
    new = rng.choice(["bf16", "f16", "bf16", "f16", "f32", "i8", "f64"])
    return re.sub(r"\b%s\b" % re.escape(m.group(1)), new, text)


def g_shape(rng, text, corpus):
    m = pick_match(rng, SHAPED_RE, text)
    if not m:
        return None
    body = m.group(2)
    dims = list(DIM_RE.finditer(body))
    if not dims:
        return None
    d = rng.choice(dims)
    n = int(d.group(1)) if d.group(1) != "?" else 64
    new = rng.choice([n * 2, max(n // 2, 1), n + 8, n + 64, 1, 8, 16, 64,
                      128, 256])
    body = body[:d.start(1)] + str(new) + body[d.end(1):]
    return text.replace(m.group(0), "%s<%s>" % (m.group(1), body))


def g_box(rng, text, corpus):
    m = pick_match(rng, re.compile(r"box = \[([^\]]*)\]"), text)
    if not m:
        return None
    dims = [d.strip() for d in m.group(1).split(",")]
    i = rng.randrange(len(dims))
    n = int(dims[i]) if dims[i].lstrip("-").isdigit() else 64
    dims[i] = str(rng.choice([n * 2, max(n // 2, 1), 1, 8, 16, 32, 64, 128,
                              192, 256]))
    new = "box = [%s]" % ", ".join(dims)
    if rng.random() < 0.6:
        return text.replace(m.group(0), new)
    return text[:m.start()] + new + text[m.end():]


def g_pipeline_param(rng, text, corpus):
    m = pick_match(rng, PARAM_RE, text)
    if not m:
        return None
    return everywhere_or_once(rng, text, m, 2,
                              rng.choice([1, 2, 3, 4, 5, 8, 16, 32]))


GENTLE_ATTENTION = {
    "head_dim": [64, 128],
    "block_n": [32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
                240, 256],
    "kv_stages": [2, 3, 4, 5, 6, 7, 8],
    "consumer_warpgroups": [1, 2],
    "producer_registers": [24, 32, 40, 56, 64, 128, 256],
    "consumer_registers": [24, 128, 160, 200, 232, 240, 256],
}


def g_attention(rng, text, corpus):
    m = pick_match(rng, ATTN_RE, text)
    if m and rng.random() < 0.5:
        return replace_match(text, m, 2,
                             rng.choice(GENTLE_ATTENTION[m.group(1)]))
    m = pick_match(rng, ATTN_OP_RE, text)
    if not m:
        return None
    name = rng.choice(list(GENTLE_ATTENTION) + list(BOOL_ATTENTION_ATTRS)
                      + ["element_type"])
    if name in BOOL_ATTENTION_ATTRS:
        value = rng.choice(["true", "false"])
    elif name == "element_type":
        value = rng.choice(["bf16", "f16"])
    else:
        value = "%d : i64" % rng.choice(GENTLE_ATTENTION[name])
    entry = "%s = %s" % (name, value)
    # Replace the attribute where the declaration has it already.
    existing = re.compile(r"\b%s = [^,}]+" % name)
    start = m.end(1)
    end = text.find("}", start)
    if existing.search(text, start, end):
        body = existing.sub(entry, text[start:end], count=1)
        return text[:start] + body + text[end:]
    return text[:start] + entry + ", " + text[start:]


def g_pending(rng, text, corpus):
    m = pick_match(rng, re.compile(r"pending = (\d+)"), text)
    if not m:
        return None
    return replace_match(text, m, 1, rng.choice(range(8)))


def g_adjacent_lines(rng, text, corpus):
    lines = lines_of(text)
    ops = [i for i, line in enumerate(lines[:-1]) if "kvpipe." in line]
    if not ops:
        return None
    i = rng.choice(ops)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    return join(lines)


def g_kvpipe_line(rng, text, corpus):
    """Deletes or duplicates one kvpipe op."""
    lines = lines_of(text)
    ops = [i for i, line in enumerate(lines) if "kvpipe." in line and
           not line.lstrip().startswith(("!", "#"))]
    if not ops:
        return None
    i = rng.choice(ops)
    if rng.random() < 0.5:
        del lines[i]
    else:
        lines.insert(i, lines[i])
    return join(lines)


GENTLE_MUTATIONS = [
    (g_int, 8), (g_stage, 4), (g_swizzle, 5), (g_element_type, 5),
    (g_shape, 8), (g_box, 5), (g_pipeline_param, 6), (g_attention, 10),
    (g_pending, 2), (g_adjacent_lines, 3), (g_kvpipe_line, 3),
    (m_protocol_op, 2), (m_remove_attribute, 2),
]
GENTLE_FUNCS = [f for f, _ in GENTLE_MUTATIONS]
GENTLE_WEIGHTS = [w for _, w in GENTLE_MUTATIONS]


def make_mutant(corpus, seed, index, valid=None, gentle_share=0.5):
    """Mutant `index` of `seed`: (seed name, mutation names, text). Mostly
    of the inputs in `valid` (indices of the corpus inputs that verify):
    their mutants reach the lowering far more often. `gentle_share` of the
    mutants take gentle mutations, which often still verify."""
    rng = random.Random("%d:%d" % (seed, index))
    if valid and rng.random() < 0.8:
        name, text = corpus[rng.choice(valid)]
    else:
        name, text = rng.choice(corpus)
    gentle = rng.random() < gentle_share
    funcs, weights = ((GENTLE_FUNCS, GENTLE_WEIGHTS) if gentle else
                      (MUTATION_FUNCS, MUTATION_WEIGHTS))
    count = rng.choices([1, 2, 3, 4], weights=[70, 20, 6, 4] if gentle else
                        [50, 30, 12, 8])[0]
    applied = []
    tries = 0
    while len(applied) < count and tries < 20:
        tries += 1
        mutation = rng.choices(funcs, weights=weights)[0]
        new = mutation(rng, text, corpus)
        if new is not None and new != text:
            text = new
            applied.append(mutation.__name__)
    return name, applied, text


# ---------------------------------------------------------------------------
# Running kvpipe-opt
# ---------------------------------------------------------------------------

def wrap_in_gpu_module(text):
    """Puts the top-level ops of an input without a gpu.module into one (type
    and attribute aliases stay outside), so --kvpipe-to-ptx lowers them."""
    if "gpu.module" in text:
        return text
    aliases, body = [], []
    for line in lines_of(text):
        (aliases if re.match(r"^[!#][\w.$-]+\s*=", line) else body).append(line)
    return join(aliases + ["gpu.module @fuzz {"] + body + ["}"])


def pipeline_options(rng, workdir):
    options = []
    if rng.random() < 0.4:
        if rng.random() < 0.3:
            options.append("wait-timeout=%d" % rng.choice(
                [1, 100000, 2**32 - 1, 2**32, 2**63, 2**64 - 1]))
        if rng.random() < 0.3:
            options.append("opt-level=%d" % rng.choice([0, 1, 2, 3]))
        if rng.random() < 0.25:
            options.append("abi-file=%s" % os.path.join(workdir, "abi.json"))
        if rng.random() < 0.25:
            options.append("ptx-file=%s" % os.path.join(workdir, "out.ptx"))
        if rng.random() < 0.15:
            options.append("chip=%s" % rng.choice(
                ["sm_90", "sm_90a", "sm_100a", "sm_89", "sm_120a", "sm_9",
                 "sm_95", "sm_100f", "gfx942", "sm_80"]))
        if rng.random() < 0.15:
            options.append("features=%s" % rng.choice(
                ["+ptx80", "+ptx83", "+ptx86", "+ptx87", "", "+ptx60"]))
        if rng.random() < 0.05:
            options.append("format=bin")
    return options


def classify(returncode, stderr):
    """None, or why the run is a crash."""
    if returncode < 0:
        return "signal %d" % -returncode
    if returncode not in (0, 1):
        return "exit code %d" % returncode
    for marker in CRASH_MARKERS:
        if marker in stderr:
            return "'%s' on stderr" % marker
    return None


LOCATED_ERROR_RE = re.compile(r"^\S+:\d+:\d+: error: ", re.M)


def unlocated(returncode, stderr):
    """Whether a failing run says nothing, or nothing with a location."""
    return returncode == 1 and not LOCATED_ERROR_RE.search(stderr)


FRAME_RE = re.compile(r"^ *#\d+ 0x[0-9a-f]+ (.*)$", re.M)
BORING_FRAME_RE = re.compile(r"^(llvm::sys::|SignalHandler|__restore_rt|"
                             r"raise|abort|__pthread|llvm::report_fatal|"
                             r"llvm::reportFatal|/|0x|$)")


def stack_frames(stderr):
    """The function names of a stack dump, innermost first, without the
    signal handling."""
    frames = []
    for text in FRAME_RE.findall(stderr):
        text = text.replace("(anonymous namespace)", "(anon)")
        text = re.sub(r" \(/[^()]*\)$", "", text)        # (/lib/x.so+0x..)
        text = re.sub(r" \S+:\d+(:\d+)?$", "", text)       # file.cpp:1:2
        name = re.split(r"\((?!anon\))", text, maxsplit=1)[0].strip()
        if not BORING_FRAME_RE.match(name):
            frames.append(name)
    return frames


def signature(kind, stderr):
    """What identifies one bug: the crash kind and its first message, or the
    innermost frames of its stack."""
    for line in stderr.splitlines():
        if any(marker in line for marker in ("LLVM ERROR", "Assertion",
                                             "UNREACHABLE")):
            return kind + ": " + re.sub(r"\d+", "N", line.strip())[:160]
    frames = stack_frames(stderr)
    return kind + (": " + " < ".join(frames[:3]) if frames else "")


# Crashes (and hangs) in upstream MLIR/LLVM code that kvpipe cannot fix:
# they happen in the installed libraries, on upstream ops, in the parser,
# printer or canonicaliser, before or outside any kvpipe code. Each is known
# by a stack frame or by what the input holds, with what is wrong and the
# upstream report. They are counted and saved but do not fail the run.
KNOWN_UPSTREAM = [
    {"frame": "mlir::detail::Parser::parseDenseArrayAttr",
     "report": "the MLIR 22 parser takes `index` as a dense array element "
               "type and asks for its bit width (array<index: ...>): "
               "llvm/llvm-project#179045, fixed upstream by "
               "llvm/llvm-project#179075 after 22.1"},
    {"frame": "mlir::vector::FromElementsOp::parse",
     "report": "vector.from_elements's parser sizes its operand type list "
               "by the result vector's element count before checking it "
               "against the operands: a shape such as vector<2^62 x f32> "
               "aborts in SmallVector::grow (MLIR 22; found by the m_shape "
               "mutation once the backward's packed rounding emitted "
               "from_elements, 2026-12-04)"},
    {"input": r"(vector\.(insert|extract)|subview|reinterpret_cast|"
              r"extract_slice|insert_slice)[^\n]*\[[^\]\n]*"
              r"-9223372036854775808",
     "report": "a static position or offset of INT64_MIN is MLIR's "
               "ShapedType::kDynamic sentinel: vector.insert %x, %v "
               "[-9223372036854775808] verifies, then the printer and the "
               "canonicaliser read a dynamic operand that is not there "
               "(signal 11, or a hang)"},
]


def known_upstream(stderr, text):
    frames = stack_frames(stderr)
    for known in KNOWN_UPSTREAM:
        if "frame" in known and known["frame"] in frames[:6]:
            return known["report"]
        if "input" in known and text and re.search(known["input"], text):
            return known["report"]
    return None


# The address-space limit of each kvpipe-opt run. A sanitizer build
# (--sanitized) reserves terabytes of shadow memory up front and cannot run
# under it; ASan's own hard_rss_limit_mb (scripts/sanitize.sh) bounds it.
MEMORY_LIMIT = 4 << 30


def limit_memory():
    if MEMORY_LIMIT is None:
        return
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass


def run_opt(opt, text, args, path, timeout):
    """(returncode or None on timeout, stderr, seconds)."""
    with open(path, "w") as f:
        f.write(text)
    start = time.time()
    try:
        proc = subprocess.run([opt, path] + args + ["-o", "/dev/null"],
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=timeout,
                              preexec_fn=limit_memory)
        stderr = proc.stderr.decode("utf-8", "replace")
        return proc.returncode, stderr, time.time() - start
    except subprocess.TimeoutExpired as e:
        stderr = (e.stderr or b"").decode("utf-8", "replace")
        return None, stderr, time.time() - start


def full_args(options):
    return ["--kvpipe-to-ptx" + ("=" + " ".join(options) if options else "")]


def minimise(opt, text, args, path, timeout, same, budget=150):
    """Deletes chunks of lines while `same(returncode, stderr)` still holds."""
    lines = lines_of(text)
    chunk = max(len(lines) // 2, 1)
    while chunk >= 1 and budget > 0:
        i = 0
        while i < len(lines) and budget > 0:
            candidate = lines[:i] + lines[i + chunk:]
            budget -= 1
            if candidate:
                rc, stderr, _ = run_opt(opt, join(candidate), args, path,
                                        timeout)
                if same(rc, stderr):
                    lines = candidate
                    continue
            i += chunk
        chunk //= 2
    return join(lines)


_STATE = {}


def minimise_crash(opt, result, timeout, workdir):
    """The crashing input of `result` with the lines removed that the crash
    does not need."""
    sig = result["signature"]

    def same(rc, stderr):
        kind = rc is not None and classify(rc, stderr)
        return bool(kind) and signature(kind, stderr) == sig

    return minimise(opt, result["text"], result["args"],
                    os.path.join(workdir, "minimise.mlir"), timeout, same)


def worker_init(corpus, valid, opt, seed, workdir, timeouts, gentle_share=0.5):
    _STATE.update(corpus=corpus, valid=valid, opt=opt, seed=seed,
                  timeouts=timeouts, gentle_share=gentle_share,
                  workdir=tempfile.mkdtemp(prefix="w%d-" % os.getpid(),
                                           dir=workdir))


def check(mode, text, args, index):
    """Runs one mode; returns a result dict."""
    opt, workdir = _STATE["opt"], _STATE["workdir"]
    timeout = _STATE["timeouts"][mode]
    path = os.path.join(workdir, "input.mlir")
    rc, stderr, seconds = run_opt(opt, text, args, path, timeout)
    result = {"mode": mode, "rc": rc, "args": args, "seconds": seconds,
              "text": text, "stderr": stderr, "crash": None, "hang": False,
              "unlocated": False, "upstream": None}
    if rc is None:
        upstream = known_upstream(stderr, text)
        if upstream:
            result["upstream"] = upstream
            result["signature"] = "upstream: " + upstream
        else:
            result["hang"] = True
        return result
    kind = classify(rc, stderr)
    if not kind and unlocated(rc, stderr):
        result["unlocated"] = True
        first = (stderr.strip().splitlines() or ["(nothing on stderr)"])[0]
        result["signature"] = "unlocated: " + re.sub(r"\d+", "N", first)[:160]
    if kind:
        upstream = known_upstream(stderr, text)
        if upstream:
            result["upstream"] = upstream
            result["signature"] = "upstream: " + upstream
            return result
        result["crash"] = kind
        result["signature"] = signature(kind, stderr)
    return result


def run_mutant(index):
    corpus, seed = _STATE["corpus"], _STATE["seed"]
    name, mutations, text = make_mutant(corpus, seed, index, _STATE["valid"],
                                        _STATE["gentle_share"])
    rng = random.Random("options:%d:%d" % (seed, index))
    results = []
    verify = check("verify", text, ["--kvpipe-verify-protocol"], index)
    results.append(verify)
    options = pipeline_options(rng, _STATE["workdir"])
    if verify["rc"] == 1 and not verify["crash"]:
        # Valid IR that breaks the protocol still must not crash the
        # lowering when the check is off.
        parse = check("verify", text, [], index)
        if parse["crash"] or parse["hang"]:
            results.append(parse)
        elif parse["rc"] == 0:
            options = [o for o in options if not o.startswith("verify")]
            options.append("verify-protocol=false")
            verify = {"rc": 0, "crash": None}
    if verify["rc"] == 0 and not verify["crash"]:
        results.append(check("full", wrap_in_gpu_module(text),
                             full_args(options), index))
    for r in results:
        if not (r["crash"] or r["hang"] or r["unlocated"] or r["upstream"]):
            # Only failures travel back to the parent.
            r["text"] = r["stderr"] = None
    return index, name, mutations, results


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def verifies(i):
    _, text = _STATE["corpus"][i]
    path = os.path.join(_STATE["workdir"], "seed.mlir")
    rc, _, _ = run_opt(_STATE["opt"], text, ["--kvpipe-verify-protocol"],
                       path, _STATE["timeouts"]["verify"])
    return i, rc == 0


def save(crash_dir, kind, index, name, mutations, result, opt, seed):
    os.makedirs(crash_dir, exist_ok=True)
    digest = hashlib.sha1(result["text"].encode()).hexdigest()[:10]
    base = os.path.join(crash_dir, "%s-%s-%d-%s" % (kind, result["mode"],
                                                    index, digest))
    text = result.get("minimised") or result["text"]
    with open(base + ".mlir", "w") as f:
        f.write(text)
    if result.get("minimised"):
        with open(base + ".orig.mlir", "w") as f:
            f.write(result["text"])
    with open(base + ".txt", "w") as f:
        f.write("seed %d mutant %d of %s, mutations: %s\n" % (
            seed, index, name, ", ".join(mutations)))
        f.write("mode %s: %s\n" % (result["mode"],
                                   result.get("signature") or "hang"))
        f.write("command: %s\n\n" % " ".join(shlex.quote(a) for a in (
            [opt, base + ".mlir"] + result["args"] + ["-o", "/dev/null"])))
        f.write(result["stderr"] or "")
    return base + ".mlir"


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kvpipe-opt", default=os.path.join(
        ROOT, "build", "bin", "kvpipe-opt"), help="the kvpipe-opt to fuzz")
    parser.add_argument("--seconds", type=float,
                        help="stop after this long (default 60 when "
                             "--mutants is not given either)")
    parser.add_argument("--mutants", type=int,
                        help="stop after this many mutants")
    parser.add_argument("--full-mutants", type=int,
                        help="stop once this many mutants have run through "
                             "the full pipeline")
    parser.add_argument("--gentle-share", type=float, default=0.5,
                        help="the share of mutants with gentle mutations "
                             "(default 0.5; more reach the full pipeline). "
                             "Mutant N of a seed depends on it")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--crash-dir", default="fuzz-crashes",
                        help="where crashing and hanging inputs go")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds before a verify run is a hang "
                             "(a full run gets three times as long)")
    parser.add_argument("--sanitized", action="store_true",
                        help="kvpipe-opt is an ASan/UBSan build: no "
                             "address-space limit (ASan reserves its shadow "
                             "memory up front)")
    parser.add_argument("--no-minimise", action="store_true")
    parser.add_argument("--no-expand", action="store_true",
                        help="do not add the expanded attention kernels to "
                             "the corpus")
    parser.add_argument("--root", default=ROOT,
                        help="the source tree whose test/ and examples/ are "
                             "the corpus")
    parser.add_argument("--dump-mutant", type=int, metavar="N",
                        help="print mutant N of the seed and exit")
    args = parser.parse_args(argv)
    if args.seconds is None and args.mutants is None and args.full_mutants is None:
        args.seconds = 60.0
    if not 0.0 <= args.gentle_share <= 1.0:
        parser.error("--gentle-share must be in [0, 1], got %s" % args.gentle_share)

    global MEMORY_LIMIT
    # ASAN_OPTIONS in the environment (lit passes it through) also means a
    # sanitizer build: the lit fuzz smoke test then runs under scripts/sanitize.sh.
    if args.sanitized or os.environ.get("ASAN_OPTIONS"):
        MEMORY_LIMIT = None
    opt = os.path.abspath(args.kvpipe_opt)
    if not os.access(opt, os.X_OK):
        parser.error("kvpipe-opt not found: %s" % opt)
    corpus, files = load_corpus(args.root)
    if not corpus:
        parser.error("no corpus under %s" % args.root)
    expanded = [] if args.no_expand else expand_attention_seeds(
        corpus, opt, args.timeout)
    corpus += expanded

    timeouts = {"verify": args.timeout, "full": 3 * args.timeout}
    workdir = tempfile.mkdtemp(prefix="kvpipe-fuzz-")
    try:
        # Which inputs verify as they are: most mutants start from those.
        with concurrent.futures.ProcessPoolExecutor(
                max_workers=args.jobs, initializer=worker_init,
                initargs=(corpus, [], opt, args.seed, workdir,
                          timeouts)) as pool:
            valid = sorted(i for i, ok in pool.map(verifies,
                                                   range(len(corpus))) if ok)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    if args.dump_mutant is not None:
        name, mutations, text = make_mutant(corpus, args.seed,
                                            args.dump_mutant, valid,
                                            args.gentle_share)
        sys.stdout.write("// mutant %d of %s: %s\n%s" % (
            args.dump_mutant, name, ", ".join(mutations), text))
        return 0

    print("kvpipe_fuzz: %s, seed %d, %d jobs, gentle share %.2f, corpus of %d "
          "inputs (%d files, %d expanded attention kernels; %d verify)" % (
              opt, args.seed, args.jobs, args.gentle_share, len(corpus), files,
              len(expanded), len(valid)), flush=True)
    counts = {"verify": 0, "full": 0}
    crashes, hangs, unlocated_runs, signatures = [], [], [], {}
    upstream_runs = []
    first_crashes = []
    start = time.time()
    deadline = start + args.seconds if args.seconds is not None else None
    limit = args.mutants
    workdir = tempfile.mkdtemp(prefix="kvpipe-fuzz-")
    next_index = 0
    done = 0
    last_report = start
    try:
        with concurrent.futures.ProcessPoolExecutor(
                max_workers=args.jobs, initializer=worker_init,
                initargs=(corpus, valid, opt, args.seed, workdir,
                          timeouts, args.gentle_share)) as pool:
            pending = set()

            def more():
                return ((limit is None or next_index < limit) and
                        (args.full_mutants is None or
                         counts["full"] < args.full_mutants) and
                        (deadline is None or time.time() < deadline))

            while True:
                while more() and len(pending) < 4 * args.jobs:
                    pending.add(pool.submit(run_mutant, next_index))
                    next_index += 1
                if not pending:
                    break
                finished, pending = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    index, name, mutations, results = future.result()
                    done += 1
                    modes_seen = set()
                    for r in results:
                        if r["mode"] not in modes_seen:
                            counts[r["mode"]] += 1
                            modes_seen.add(r["mode"])
                        if r["crash"]:
                            crashes.append(r)
                            sig = r["signature"]
                            seen = signatures.setdefault(sig, [])
                            if len(seen) < 3:
                                # The first few of each bug; the first one
                                # is minimised at the end.
                                path = save(args.crash_dir, "crash", index,
                                            name, mutations, r, opt,
                                            args.seed)
                                if not seen:
                                    print("CRASH (%s) mutant %d of %s [%s]: "
                                          "%s -> %s" % (
                                              r["mode"], index, name,
                                              ", ".join(mutations), sig,
                                              path), flush=True)
                                    first_crashes.append(
                                        (index, name, mutations, r))
                                seen.append(path)
                            else:
                                seen.append("")
                        elif r["upstream"]:
                            sig = r["signature"]
                            if sig not in signatures:
                                path = save(args.crash_dir, "upstream", index,
                                            name, mutations, r, opt, args.seed)
                                print("KNOWN UPSTREAM CRASH (%s) mutant %d of "
                                      "%s: %s -> %s" % (r["mode"], index,
                                                        name, r["upstream"],
                                                        path), flush=True)
                                signatures[sig] = [path]
                            else:
                                signatures[sig].append("")
                            upstream_runs.append(r)
                        elif r["unlocated"]:
                            sig = r["signature"]
                            if sig not in signatures:
                                path = save(args.crash_dir, "unlocated", index,
                                            name, mutations, r, opt, args.seed)
                                print("UNLOCATED (%s) mutant %d of %s: %s -> %s"
                                      % (r["mode"], index, name, sig, path),
                                      flush=True)
                                signatures[sig] = [path]
                            else:
                                signatures[sig].append("")
                            unlocated_runs.append(r)
                        elif r["hang"]:
                            path = save(args.crash_dir, "hang", index, name,
                                        mutations, r, opt, args.seed)
                            hangs.append(r)
                            print("HANG (%s) mutant %d of %s: %s" % (
                                r["mode"], index, name, path), flush=True)
                now = time.time()
                if now - last_report >= 60:
                    last_report = now
                    print("  %d mutants, %.0f s: verify %d, full %d, crashes "
                          "%d, hangs %d" % (done, now - start,
                                            counts["verify"], counts["full"],
                                            len(crashes), len(hangs)),
                          flush=True)
        seconds = time.time() - start
        if not args.no_minimise:
            for index, name, mutations, r in first_crashes:
                r["minimised"] = minimise_crash(opt, r, timeouts[r["mode"]],
                                                workdir)
                save(args.crash_dir, "crash", index, name, mutations, r, opt,
                     args.seed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    for mode in ("verify", "full"):
        print("mode %s: %d mutants, %d crashes, %d hangs, %d unlocated "
              "diagnostics" % (
                  mode, counts[mode], sum(r["mode"] == mode for r in crashes),
                  sum(r["mode"] == mode for r in hangs),
                  sum(r["mode"] == mode for r in unlocated_runs)))
    for sig, paths in sorted(signatures.items()):
        print("  %d x %s (e.g. %s)" % (len(paths), sig, paths[0]))
    print("total: %d mutants in %.1f s; crashes: %d; hangs: %d; unlocated "
          "diagnostics: %d; known upstream crashes: %d" % (
              done, seconds, len(crashes), len(hangs), len(unlocated_runs),
              len(upstream_runs)))
    if crashes:
        return 1
    if hangs:
        return 2
    if unlocated_runs:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
