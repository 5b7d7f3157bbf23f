"""A lockstep interpreter for the row-wise kernels' generic-form IR.

Runs one CTA of `threads` threads: every value is a list with one entry per
thread, `scf.if` runs its regions under a thread mask, `gpu.shuffle` reads
the partner lane's value (all partners must be active). Memory goes through
the caller's `load(pointer, type)` and `store(pointer, type, value)`, a
pointer being (buffer name, byte offset). Floats are Python floats (extf and
truncf keep them); a non-numeric value (a symbolic element) passes through
`mulf` unchanged. Enough of arith, vector, llvm, gpu and scf for the backward
preprocess and postprocess (test/Transforms/backward-*-map.test).
"""
import re
import subprocess

SIZES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8, "i8": 1}
PREDICATES = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 6: lambda a, b: a < b,
              7: lambda a, b: a <= b, 8: lambda a, b: a > b, 9: lambda a, b: a >= b}


def kernel_ops(opt, declaration, kernel):
    """(entry block arguments, ops) of `kernel` in the expansion of the
    attention_kernel `declaration` (attributes of a backward @bwd)."""
    src = ('gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {\n'
           f'  kvpipe.attention_kernel @bwd {{{declaration}}}\n}}\n')
    lines = subprocess.run([opt, "--kvpipe-expand-attention=stage=skeleton", "--canonicalize",
                            "--cse", "--mlir-print-op-generic", "-"], input=src, text=True,
                           capture_output=True, check=True).stdout.splitlines()
    end = next(i for i, l in enumerate(lines) if f'sym_name = "{kernel}"' in l)
    start = max(i for i in range(end) if '"gpu.func"' in lines[i])
    return re.findall(r"%arg\d+", lines[start + 1]), parse(lines[start + 2:end])


def parse(lines):
    root, stack = [], []
    current = root
    for line in lines:
        s = line.strip()
        if s.startswith("}, {"):
            region = []
            stack[-1].append(region)
            current = region
            continue
        if s.startswith("})"):
            stack.pop()
            current = stack[-1][-1] if stack else root
            continue
        if s.startswith("^bb"):  # a region's block arguments
            current.append({"name": "^args", "args": re.findall(r"(%[\w]+):", s)})
            continue
        m = re.match(r'(?:(%[\w#:]+) = )?"([\w.]+)"\((.*?)\)(.*)$', s)
        if not m:
            continue
        results = m.group(1)
        if results and ":" in results:  # %r:2
            name, count = results.split(":")
            results = [f"{name}#{i}" for i in range(int(count))]
        else:
            results = [results] if results else []
        op = {"results": results, "name": m.group(2),
              "operands": [o.strip() for o in m.group(3).split(",") if o.strip()],
              "attrs": m.group(4), "regions": []}
        current.append(op)
        if op["attrs"].strip().startswith("({"):
            op["regions"].append([])
            stack.append(op["regions"])
            current = op["regions"][0]
    return root


def signature(attrs):
    """(operand types, result type) of a generic op's trailing signature."""
    sig = attrs.rsplit(" : ", 1)[-1]
    m = re.match(r"\((.*)\) -> (.*)$", sig.strip())
    return m.group(1), m.group(2)


class Interpreter:
    def __init__(self, threads, block, load, store):
        self.threads, self.block, self.load, self.store = threads, block, load, store
        self.grid = {}  # gpu.grid_dim's extents, where a kernel reads them
        self.env = {}

    def bind(self, names, values):
        for name, value in zip(names, values):
            self.env[name] = [value] * self.threads

    def run(self, ops, mask=None):
        mask = mask or [True] * self.threads
        for op in ops:
            if op["name"] == "scf.if":
                cond = self.env[op["operands"][0]]
                then = [m and bool(c) for m, c in zip(mask, cond)]
                other = [m and not bool(c) for m, c in zip(mask, cond)]
                yields = {}
                for region, sub in zip(op["regions"], (then, other)):
                    if any(sub):
                        yields[id(region)] = (self.run(region, sub), sub)
                for i, result in enumerate(op["results"]):
                    value = [None] * self.threads
                    for (y, sub) in yields.values():
                        for t in range(self.threads):
                            if sub[t]:
                                value[t] = self.env[y[i]][t]
                    self.env[result] = value
            elif op["name"] == "scf.for":
                assert not op["results"], "scf.for with iter_args"
                lower, upper, step = (self.env[o] for o in op["operands"])
                t0 = mask.index(True)
                body = op["regions"][0]
                for iv in range(lower[t0], upper[t0], step[t0]):
                    self.env[body[0]["args"][0]] = [iv] * self.threads
                    self.run(body[1:], mask)
            elif op["name"] == "^args":
                pass
            elif op["name"] == "scf.yield":
                return op["operands"]
            elif op["name"] == "gpu.return":
                return []
            else:
                self.step(op, mask)
        return []

    def step(self, op, mask):
        n, attrs = op["name"], op["attrs"]
        a = [self.env[o] for o in op["operands"]]
        lanes = range(self.threads)
        operand_types, result_type = signature(attrs)

        def each(f):
            return [f(*(x[t] for x in a)) if mask[t] else None for t in lanes]

        if n == "arith.constant":
            m = re.search(r"value = (dense<)?([-\w.+]+)>?", attrs)
            v = m.group(2)
            v = float(v) if re.search(r"[.e]", v) and v not in ("true", "false") else \
                int({"true": 1, "false": 0}.get(v, v))
            shape = re.match(r"vector<(\d+)x", result_type)
            r = [[v] * int(shape.group(1)) if shape else v] * self.threads
        elif n == "gpu.thread_id":
            r = list(lanes)
        elif n == "gpu.block_id":
            r = [self.block[re.search(r"dim (\w)", attrs).group(1)]] * self.threads
        elif n == "gpu.grid_dim":
            r = [self.grid[re.search(r"dim (\w)", attrs).group(1)]] * self.threads
        elif n in INTEGER:
            r = each(INTEGER[n])
        elif n in ("arith.index_cast", "arith.extui", "arith.truncf", "arith.extf"):
            r = each(lambda x: x)
        elif n == "arith.cmpi":
            p = PREDICATES[int(re.search(r"predicate = (\d+)", attrs).group(1))]
            r = each(lambda x, y: int(p(x, y)))
        elif n == "arith.select":
            r = each(lambda c, x, y: x if c else y)
        elif n in ("arith.mulf", "arith.addf"):
            def arith(x, y):
                if isinstance(x, list):
                    return [arith(u, v) for u, v in zip(x, y)]
                if not isinstance(x, float) or not isinstance(y, float):
                    return x if not isinstance(x, float) else y
                return x * y if n == "arith.mulf" else x + y
            r = each(arith)
        elif n == "vector.reduction":
            r = each(lambda v: sum(v))
        elif n == "vector.broadcast":
            count = int(re.search(r"vector<(\d+)x", result_type).group(1))
            r = each(lambda x: [x] * count)
        elif n == "vector.extract":
            pos = int(re.search(r"static_position = array<i64: (\d+)>", attrs).group(1))
            r = each(lambda v: v[pos])
        elif n == "vector.from_elements":
            r = each(lambda *xs: list(xs))
        elif n == "llvm.bitcast":  # vector<2 x 16-bit> -> i32: a pair
            r = each(lambda v: ("pair", v[0], v[1]))
        elif n == "llvm.ptrtoint":
            r = each(lambda p: self.load(p, "address"))
        elif n == "llvm.getelementptr":
            elem = re.search(r"elem_type = (\w+)", attrs).group(1)
            raw = int(re.search(r"rawConstantIndices = array<i32: (-?\d+)>", attrs).group(1))
            if raw != -2147483648:  # a constant index instead of an operand
                a.append([raw] * self.threads)
            r = each(lambda p, i: (p[0], p[1] + i * SIZES[elem]))
        elif n == "llvm.load":
            r = each(lambda p: self.load(p, result_type))
        elif n == "llvm.store":
            value_type = operand_types.split(",")[0].strip()
            for t in lanes:
                if mask[t]:
                    self.store(a[1][t], value_type, a[0][t])
            return
        elif n == "gpu.shuffle":
            assert re.search(r"shuffle_mode (\w+)", attrs).group(1) == "xor"
            partner = [(t & ~31) | ((t % 32) ^ a[1][t]) if mask[t] else None for t in lanes]
            assert all(mask[partner[t]] for t in lanes if mask[t]), "inactive partner"
            r = [a[0][partner[t]] if mask[t] else None for t in lanes]
            self.env[op["results"][1]] = [1] * self.threads
        else:
            raise NotImplementedError(n)
        self.env[op["results"][0]] = r


INTEGER = {"arith.addi": lambda x, y: x + y, "arith.subi": lambda x, y: x - y,
           "arith.muli": lambda x, y: x * y, "arith.andi": lambda x, y: x & y,
           "arith.ori": lambda x, y: x | y, "arith.remui": lambda x, y: x % y,
           "arith.divui": lambda x, y: x // y, "arith.ceildivui": lambda x, y: -(-x // y),
           "arith.minui": min, "arith.maxui": max, "arith.minsi": min, "arith.maxsi": max}


def write_recorder(writes):
    """A `store` for Interpreter that records each element stored, by
    (buffer, element index), in `writes` ("twice" where stored again). An
    i32 that is a bitcast pair of 16-bit elements (llvm.bitcast) is its two
    elements."""
    def store(pointer, type_, stored):
        m = re.match(r"vector<(\d+)x(\w+)>", type_)
        count, elem = (int(m.group(1)), m.group(2)) if m else (1, type_)
        values = stored if m else [stored]
        size = SIZES[elem]
        if any(isinstance(v, tuple) and v[0] == "pair" for v in values):
            values = [x for v in values for x in v[1:]]
            size = 2
        for k, v in enumerate(values):
            key = (pointer[0], pointer[1] // size + k)
            writes[key] = "twice" if key in writes else v
    return store


def count_mismatches(expected, writes):
    """Expected elements missing, stored twice or off by more than 1e-5
    (relative above 1), plus elements stored that none expected."""
    mismatches = sum(1 for key, v in expected.items()
                     if not isinstance(writes.get(key), float)
                     or abs(writes[key] - v) > 1e-5 * max(1.0, abs(v)))
    return mismatches + sum(1 for key in writes if key not in expected)
