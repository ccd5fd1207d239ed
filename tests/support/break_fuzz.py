"""Random programs with control flow and Python-only statements ("breaks"): split functions against eager.

The programs are control_fuzz's (branches on tensor values, loops with break/continue/else,
lists of tensors), with statements a region cannot take drawn in at random places, inside
loops, branches and ``try`` bodies too, each one's result flowing on into the tensor code:

* a dict round trip of a live tensor (``_d = {"k": t}; t = _d["k"]``), sometimes two tensors,
  sometimes an in-place op through the dict's alias;
* ``.tolist()`` of a tensor used afterwards: its ``len``, ``sum``, a Python loop over it, a
  tensor built back from it, ``sorted`` of it;
* ``try``/``except`` around generated statements: some bodies always raise (a ``view`` to a
  shape no tensor here has, a ``ValueError`` of our own), the handler does tensor work with
  the message's length, with ``else``/``finally`` clauses;
* ``with contextlib.nullcontext():`` around generated statements;
* calls of plain Python helpers defined outside the cell (``HELPERS``: a shape's text, a dict
  lookup, a scale through ``float``), ``math.floor``, ``str(t.shape)``, f-strings, a lambda;
* ``isinstance`` checks, ``del`` of a name that is dead after it;
* a Python list shared between the parts (``acc = []`` first, ``acc.append(t)`` anywhere,
  ``torch.stack(acc)`` later, numbers from ``.item()`` appended and summed);
* an early ``return`` (the program's own return form), ``raise ValueError("fuzz: ...")``,
  ``break``/``continue`` right next to a break.

Programs must run in eager: one that raises anything but our own ``ValueError("fuzz...")`` is
drawn again. ``run_batch`` compiles a batch in one cell, calls every program until its split
settles (``ppy_magic.wait()`` between rounds), and compares each call with eager.
``tests/test_fuzz_breaks.py`` is the CI-sized run, ``python -m benchmarks.fuzz --breaks`` the
large one.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from tests.support import control_fuzz, eager
from tests.support.breaks import shape
from tests.support.control_fuzz import LITERALS, UNARY, ControlProgram
from tests.support.outcomes import first_line
from tests.support.source import HEADER

INTERNAL = "cannot compile this ("  # a compiler bug, when a break's reason says it
OURS = "fuzz"  # the prefix of the ValueError messages the programs raise on purpose


# -- helpers outside the cell: plain Python the programs call --------------------------------------
def helper_describe(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)}:{str(t.dtype).split('.')[-1]}"


def helper_pick(d: dict, key: str) -> Any:
    return d[key]


def helper_scale(t: torch.Tensor, k: Any) -> torch.Tensor:
    return t * float(k)


def helper_total(xs: list) -> float:
    total = 0.0
    for v in xs:
        total += float(v)
    return total


HELPERS = {f.__name__: f for f in (helper_describe, helper_pick, helper_scale, helper_total)}


def namespace() -> dict:
    """The globals a batch's cell runs in: its imports come from HEADER, the helpers are defined outside it."""
    return {"__name__": "__ppy_break_fuzz__", "contextlib": contextlib, **HELPERS}


CELL_HEADER = HEADER + "import contextlib\n\n"
KINDS = (
    "dict",
    "tolist",
    "try",
    "with",
    "helper",
    "isinstance",
    "del",
    "acc",
    "early",
    "jump",
)


@dataclass(frozen=True)
class BreakProgram(ControlProgram):
    inserted: tuple[str, ...] = ()  # the kinds of Python-only statements drawn in, in order

    def text(self, name: str = "f") -> str:
        return f"def {name}(x0, x1):\n" + "".join(f"    {ln}\n" for ln in self.lines)


class _BreakWriter(control_fuzz._Writer):
    """control_fuzz's writer, drawing Python-only statements among its own."""

    def __init__(self, rng: random.Random, rank: int, ret: str, acc: bool, kinds: tuple[str, ...] = KINDS):
        super().__init__(rng, rank)
        self.kinds = kinds
        self.ret = ret  # the program's return statement: an early return is the same form
        self.acc = acc
        self.inserted: list[str] = []
        self.in_try = 0

    def statement(self, depth: int, names: list[str], loops: list[str], nesting: int) -> list[str]:
        if self.rng.random() < 0.35:
            return self.python(depth, names, loops, nesting)
        return super().statement(depth, names, loops, nesting)

    def live(self, names: list[str]) -> str:
        """A name to rebind: a generated tensor when there is one (x0 and x1 are the inputs)."""
        own = [n for n in names if n.startswith("t")]
        return self.rng.choice(own or names)

    def python(
        self, depth: int, names: list[str], loops: list[str], nesting: int, kind: str | None = None
    ) -> list[str]:
        r = self.rng
        kinds = [k for k in self.kinds if (k != "acc" or self.acc) and (k != "jump" or loops)]
        if nesting >= 2:
            kinds = [k for k in kinds if k not in ("try", "with")]
        if not kind and not kinds:
            return super().statement(depth, names, loops, nesting)
        kind = kind or r.choice(kinds)
        self.inserted.append(kind)
        return getattr(self, f"_{kind}")(depth, names, loops, nesting)

    # -- the kinds ---------------------------------------------------------------------------------
    def _dict(self, depth, names, loops, nesting):
        r = self.rng
        d = self.name("_d")
        a = r.choice(names)
        form = r.random()
        if form < 0.4:
            target = self.live(names)
            self.emit(depth, f'{d} = {{"k": {a}}}\n{target} = {d}["k"]')
            return names
        if form < 0.7:
            b = r.choice(names)
            new = self.name()
            self.emit(depth, f'{d} = {{"a": {a}, "b": {self.expr(names)}}}')
            self.emit(depth, f'{new} = {d}["b"] * 0.5 + {d}["a"] if len({d}) == 2 else {b}')
            return names + [new]
        # an in-place op through the dict's alias: the name bound to the same tensor sees it
        new = self.name()
        self.emit(depth, f"{new} = {self.expr(names)}")
        op = r.choice(("mul_(0.5)", "add_(1.0)", "clamp_(min=-1.0)"))
        self.emit(depth, f'{d} = {{"k": {new}}}\n{d}["k"].{op}')
        return names + [new]

    def _tolist(self, depth, names, loops, nesting):
        r = self.rng
        a, target = r.choice(names), self.live(names)
        ls = self.name("_l")
        if self.rank == 0:
            self.emit(depth, f"{ls} = [{a}.tolist()]")
        else:
            self.emit(depth, f"{ls} = {a}{'.flatten()' if self.rank > 1 else ''}.tolist()")
        form = r.randrange(5)
        if form == 0:
            n = self.name("_n")
            self.emit(depth, f"{n} = len({ls})\n{target} = {target} * {n} + 0.5")
        elif form == 1:
            self.emit(depth, f"{target} = {target} + sum({ls}) * 0.125")
        elif form == 2:
            v, s = self.name("_v"), self.name("_s")
            lit = r.choice(LITERALS)
            self.emit(depth, f"{s} = 0.0\nfor {v} in {ls}:\n    if {v} > {lit}:\n        {s} = {s} + {v}")
            self.emit(depth, f"{target} = {target} - {s}")
        elif form == 3:
            self.emit(depth, f"{target} = {target} + torch.tensor({ls}, dtype={a}.dtype).reshape({a}.shape)")
        else:
            self.emit(depth, f"{target} = torch.tensor(sorted({ls}), dtype={a}.dtype).reshape({a}.shape) * {target}")
        return names

    def _try(self, depth, names, loops, nesting):
        r = self.rng
        e = self.name("_e")
        target = self.live(names)
        self.emit(depth, "try:")
        self.in_try += 1
        form = r.randrange(4)
        if form == 0:  # a shape no tensor here has (no size is a multiple of 7): always a RuntimeError
            self.block(depth + 1, names, loops, nesting + 1)
            self.emit(depth + 1, f"{target} = {r.choice(names)}.view(7, -1).sum(0)")
            caught = "RuntimeError"
        elif form == 1:  # a ValueError of ours, when a condition on the values holds
            self.block(depth + 1, names, loops, nesting + 1)
            self.emit(depth + 1, f'if {self.cond(names)}:\n    raise ValueError("{OURS}: " + str({target}.shape))')
            caught = "(ValueError, RuntimeError)"
        elif form == 2:  # a matmul of mismatched shapes
            self.emit(depth + 1, f"{target} = {r.choice(names)} @ torch.ones(7, 3, dtype={target}.dtype)")
            caught = "RuntimeError"
        else:  # nothing raises
            self.block(depth + 1, names, loops, nesting + 1)
            caught = r.choice(("RuntimeError", "Exception"))
        self.in_try -= 1
        self.emit(depth, f"except {caught} as {e}:")
        self.emit(depth + 1, f"{target} = {self.expr(names)} * (len(str({e})) % 5 + 1)")
        if r.random() < 0.3:
            self.emit(depth, "else:")
            self.emit(depth + 1, f"{target} = {self.expr(names)}")
        if r.random() < 0.3:
            self.emit(depth, "finally:")
            self.block(depth + 1, names, loops, nesting + 1)
        return names  # names bound in the body may not be: only rebinding flows on

    def _with(self, depth, names, loops, nesting):
        self.emit(depth, "with contextlib.nullcontext():")
        return self.block(depth + 1, names, loops, nesting + 1)

    def _helper(self, depth, names, loops, nesting):
        r = self.rng
        a, target = r.choice(names), self.live(names)
        form = r.randrange(6)
        if form == 0:
            k = self.name("_k")
            self.emit(depth, f"{k} = math.floor(max(min({a}.sum().item(), 1e6), -1e6))")
            self.emit(depth, f"{target} = {target} + {k} * 0.25")
        elif form == 1:
            s = self.name("_s")
            self.emit(depth, f"{s} = str({a}.shape)\n{target} = {target} * (len({s}) % 4 + 1)")
        elif form == 2:
            s = self.name("_s")
            self.emit(depth, f"{s} = helper_describe({a})\n{target} = {target} + len({s}) * 0.5")
        elif form == 3:
            d = self.name("_d")
            self.emit(depth, f'{d} = {{"p": {a}, "q": {target}}}')
            self.emit(depth, f'{target} = helper_pick({d}, "{r.choice("pq")}") * 0.5 + {target}')
        elif form == 4:
            self.emit(depth, f"{target} = helper_scale({self.expr(names)}, {a}.numel())")
        else:
            fn = self.name("_fn")
            self.emit(depth, f"{fn} = lambda u: {UNARY[r.randrange(len(UNARY) - 3)].format(a='(u)')}")
            self.emit(depth, f'{target} = {fn}({a}) if f"{{{a}.sum().item():.3f}}" else {target}')
        return names

    def _isinstance(self, depth, names, loops, nesting):
        r = self.rng
        a, target = r.choice(names), self.live(names)
        check = r.choice(
            (
                f"isinstance({a}, torch.Tensor)",
                "isinstance(ys, list)",
                f"isinstance({a}.sum().item(), float)",
                f"not isinstance({a}, (list, tuple))",
                f"isinstance({a}.shape, tuple)",
            )
        )
        self.emit(depth, f"if {check}:\n    {target} = {self.expr(names)}")
        if r.random() < 0.5:
            self.emit(depth, f"else:\n    {target} = {a}")
        return names

    def _del(self, depth, names, loops, nesting):
        r = self.rng
        tmp, target = self.name("_tmp"), self.live(names)
        self.emit(depth, f"{tmp} = {self.expr(names)}")
        self.emit(depth, f"{target} = {tmp} * 0.5 + {r.choice(names)}")
        self.emit(depth, f"del {tmp}")
        return names

    def _acc(self, depth, names, loops, nesting):
        r = self.rng
        form = r.randrange(4)
        if form == 0:
            self.emit(depth, f"acc.append({self.expr(names)})")
            return names
        if form == 1:
            self.emit(depth, f"nums.append({r.choice(names)}.sum().item())")
            return names
        new = self.name()
        if form == 2:
            self.emit(depth, f"{new} = torch.stack(acc).sum(0) if acc else {r.choice(names)}")
        else:
            self.emit(depth, f"{new} = {r.choice(names)} * (sum(nums) * 0.01 + 1)")
        return names + [new]

    def _early(self, depth, names, loops, nesting):
        r = self.rng
        self.emit(depth, f"if {self.cond(names)}:")
        d = self.name("_d")
        self.emit(depth + 1, f'{d} = {{"k": {r.choice(names)}}}')
        if r.random() < 0.3 and not self.in_try:
            self.emit(depth + 1, f'raise ValueError("{OURS}: " + helper_describe({d}["k"]))')
        else:
            last = self.live(names)
            self.emit(depth + 1, f'{last} = {d}["k"]')
            self.emit(depth + 1, self.ret.format(last=last))
        return names

    def _jump(self, depth, names, loops, nesting):
        r = self.rng
        a = r.choice(names)
        ls = self.name("_l")
        self.emit(depth, f"{ls} = {a}.reshape(-1).tolist()")
        self.emit(depth, f"if len({ls}) > 0 and {ls}[0] > {r.choice(LITERALS)}:\n    {r.choice(('break', 'continue'))}")
        return names


RETURNS = (
    "return {last}",
    "return {last}, torch.stack(ys)",
    "return ys",
    "return {last}, len(ys)",
    "return {last}.sum().item(), ys[-1]",
)


def draw(seed: int, exclude: tuple[str, ...] = ()) -> BreakProgram:
    """One program, the same for the same seed; it holds at least one Python-only statement.
    `exclude`: kinds of them (KINDS) to leave out, to look past a known bug."""
    r = random.Random(seed)
    rank = r.randint(0, 3)
    shape_ = tuple(r.randint(1, 4) for _ in range(rank))
    dtype = r.choice((torch.float32, torch.float64))
    ret = r.choice(RETURNS)
    acc = r.random() < 0.4
    w = _BreakWriter(r, rank, ret, acc, tuple(k for k in KINDS if k not in exclude))
    w.emit(0, "ys = [x0]")
    if acc:
        w.emit(0, "acc = []\nnums = []")
    names = w.block(0, ["x0", "x1"], [], 0)
    while w.budget > 0:
        w.budget -= 1
        names = w.statement(0, names, [], 0)
    sure = [k for k in ("dict", "tolist", "try", "helper") if k not in exclude]  # always a break
    if sure and not set(w.inserted) & set(sure):
        names = w.python(0, names, [], 0, kind=r.choice(sure))
    last = names[-1]
    if acc and r.random() < 0.5:
        w.emit(0, f"{last} = torch.stack(acc + [{last}]).sum(0) + len(nums)")
    w.emit(0, ret.format(last=last))
    grads = (r.random() < 0.5, r.random() < 0.5)
    return BreakProgram(shape_, dtype, grads, tuple(w.lines), seed, tuple(w.inserted))


def eager_error(p: BreakProgram) -> Exception | None:
    """What eager raises for `p` on its inputs (None: it returns)."""
    ns = {"torch": torch, "F": F, "math": math, **namespace()}
    exec(compile(p.text(), "<break-fuzz>", "exec"), ns)  # noqa: S102 - our own generated text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ns["f"](*p.inputs())
        except Exception as exc:  # noqa: BLE001 - what eager says
            return exc
    return None


def runs_in_eager(p: BreakProgram) -> bool:
    """True if eager returns, or raises only the ValueError the program raises on purpose."""
    exc = eager_error(p)
    return exc is None or (type(exc) is ValueError and str(exc).startswith(OURS))


def generate(n: int, seed: int = 0, exclude: tuple[str, ...] = ()) -> list[BreakProgram]:
    """`n` distinct programs (text or inputs differ) that eager runs (or that raise our ValueError)."""
    unknown = set(exclude) - set(KINDS)
    if unknown:
        raise ValueError(f"no such kinds of Python-only statements: {sorted(unknown)}; the kinds: {KINDS}")
    found: list[BreakProgram] = []
    seen: set = set()
    k = 0
    while len(found) < n and k < 20 * n + 100:
        p = draw(seed * 1_000_003 + k + 7_777_777, exclude)
        k += 1
        key = (p.lines, p.params)
        if key in seen or not runs_in_eager(p):
            continue
        seen.add(key)
        found.append(p)
    return found


# -- the run ----------------------------------------------------------------------------------------
SPLIT = "split"  # a region for some of its parts, Python between them
WHOLE = "whole region"  # compiled whole: its Python-only statements turned out to be in the language
PYTHON = "python"  # stayed Python wholly
MATCH, MISMATCH, CRASH, NONDETERMINISTIC = "match", "mismatch", "crash", "eager-nondeterministic"


@dataclass
class Result:
    index: int
    program: BreakProgram
    name: str
    status: str = MATCH  # MATCH, MISMATCH, CRASH or NONDETERMINISTIC
    form: str = PYTHON  # SPLIT, WHOLE or PYTHON
    detail: str = ""
    rounds: int = 0
    settled: bool = False
    ran_regions: bool = False  # the compared call ran at least one region
    breaks: list[str] = field(default_factory=list)  # describe() of the split
    internal: list[str] = field(default_factory=list)  # reasons that are compiler bugs

    def reproduction(self) -> str:
        lines = [CELL_HEADER.rstrip(), "", self.source().rstrip(), ""]
        if "helper_" in lines[2]:
            lines.append("# helper_*: tests.support.break_fuzz.HELPERS, defined outside the cell (namespace())")
        for i, a in enumerate(self.program.inputs()):
            lines.append(
                f"# arg {i}: torch.randn({tuple(a.shape)}, dtype={a.dtype}) * 1.5, requires_grad={a.requires_grad}"
            )
        lines.append(f"# inputs: tests.support.break_fuzz.draw({self.program.seed}).inputs()")
        return "\n".join(lines)

    def source(self) -> str:
        return self.program.case(self.name).source

    def __str__(self) -> str:
        text = f"{self.name} [seed {self.program.seed}, {self.form}]: {self.status}"
        if self.detail:
            text += f": {self.detail}"
        if self.internal:
            text += "\n  internal: " + "\n  internal: ".join(self.internal)
        return text


@dataclass
class Figures:
    programs: int = 0
    split: int = 0
    whole: int = 0
    python: int = 0
    matched: int = 0
    mismatched: int = 0
    crashed: int = 0
    nondeterministic: int = 0
    unsettled: int = 0
    ran_regions: int = 0
    breaks: int = 0  # breaks in all the splits
    rounds: int = 0  # calls per program, the most in a batch, summed over batches
    generate_seconds: float = 0.0
    compile_seconds: float = 0.0
    settle_seconds: float = 0.0
    compare_seconds: float = 0.0
    results: list[Result] = field(default_factory=list)

    @property
    def internal(self) -> list[Result]:
        return [r for r in self.results if r.internal]

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.status in (MISMATCH, CRASH) or r.internal]

    def add(self, results: list[Result]) -> None:
        self.results += results
        self.programs += len(results)
        for r in results:
            self.split += r.form == SPLIT
            self.whole += r.form == WHOLE
            self.python += r.form == PYTHON
            self.matched += r.status == MATCH
            self.mismatched += r.status == MISMATCH
            self.crashed += r.status == CRASH
            self.nondeterministic += r.status == NONDETERMINISTIC
            self.unsettled += not r.settled
            self.ran_regions += r.ran_regions
            self.breaks += sum(ln.lstrip().startswith("break at") for ln in r.breaks)

    def text(self) -> str:
        return "\n".join(
            (
                f"programs:           {self.programs}",
                f"split with regions: {self.split}",
                f"whole regions:      {self.whole}",
                f"stayed Python:      {self.python}",
                f"matched:            {self.matched}",
                f"mismatched:         {self.mismatched}",
                f"crashed:            {self.crashed}",
                f"eager-nondeterministic: {self.nondeterministic}",
                f"internal errors:    {len(self.internal)} programs with a reason saying {INTERNAL!r}",
                f"not settled:        {self.unsettled} (split or builds still changing after the last round)",
                f"compared call ran a region: {self.ran_regions}",
                f"breaks:             {self.breaks} in all ({self.breaks / max(self.split, 1):.1f} per split program)",
                f"time: generate {self.generate_seconds:.1f} s, compile {self.compile_seconds:.1f} s, "
                f"calls and builds until settled {self.settle_seconds:.1f} s ({self.rounds} rounds), "
                f"compare {self.compare_seconds:.1f} s",
            )
        )


@dataclass
class _Timing:
    compile: float = 0.0
    settle: float = 0.0
    compare: float = 0.0
    rounds: int = 0


def _form(f: Any) -> str:
    if getattr(f, "__ppy_driver__", None) is not None:
        return SPLIT if f.__ppy_region__ is True else PYTHON
    return WHOLE if getattr(f, "__ppy_region__", False) is True else PYTHON


def _reasons(f: Any, report: Any) -> list[str]:
    """Every reason the compiler gave about `f`: at the cell, its breaks, its runs left Python, its parts'."""
    out = [why for fn, why in getattr(report, "python", ()) if fn == f.__name__]
    out.append(f.__dict__.get("__ppy_call_reason__") or "")
    split = f.__dict__.get("__ppy_split__")
    if split is not None:
        out += [why for _, why in split.breaks.values()]
        out += [why for _, _, why in split.left]
        out += [p.region.__dict__.get("__ppy_call_reason__") or "" for p in split.parts]
    return [r for r in out if r]


def _parts_calls(f: Any) -> int:
    return sum(p.calls for p in getattr(f, "__ppy_parts__", ()))


def run_batch(
    programs: list[BreakProgram],
    *,
    start: int = 0,
    rounds: int = 6,
    prefix: str = "ppy-fuzz-breaks",
    timeout: float = 1800,
) -> tuple[list[Result], _Timing]:
    """Compile `programs` in one cell, call each until settled, and compare each call with eager."""
    import ppy_magic
    from tests.support.cells import compile_cell

    results = [Result(start + i, p, f"brk{start + i}") for i, p in enumerate(programs)]
    source = CELL_HEADER + "\n\n".join(r.source().rstrip() + "\n" for r in results)
    timing = _Timing()
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns, report = compile_cell(source, namespace=namespace(), filename=f"<{prefix}-{start}>")
    except Exception as exc:  # noqa: BLE001 - the compiler must never raise on valid Python
        for r in results:
            r.status, r.detail = CRASH, f"compiling the cell raised {type(exc).__name__}: {first_line(exc)}"
        return results, timing
    finally:
        timing.compile = time.perf_counter() - t0
    live = []
    for r in results:
        f = ns.get(r.name)
        if f is None or not hasattr(f, "__wrapped__"):
            r.status, r.detail = CRASH, "the function is missing or not compiled after running the cell"
        else:
            live.append((r, f, r.program.inputs()))
    # eager's run of each program, once: every call of the compiled function is compared with it
    wants = {r.name: eager._call(f.__wrapped__, tuple(args), {}) for r, f, args in live}
    t1 = time.perf_counter()
    before: dict[str, tuple] = {}
    todo = list(live)
    for k in range(rounds):
        if not todo:
            break
        for r, f, args in todo:
            got = eager._call(f, tuple(args), {})
            r.rounds += 1
            diffs = eager._diff_runs(got, wants[r.name])
            if diffs and r.status == MATCH:
                r.status, r.detail = MISMATCH, f"call {k + 1} (while settling): " + "; ".join(diffs[:3])
        if not ppy_magic.wait(timeout=timeout):
            for r, _, _ in todo:
                r.status, r.detail = CRASH, f"the builds did not land in {timeout} s"
            break
        still = []
        for r, f, args in todo:
            now = shape(f)
            if before.get(r.name) == now:
                r.settled = True
            else:
                before[r.name] = now
                still.append((r, f, args))
        todo = still
    timing.rounds = max((r.rounds for r, _, _ in live), default=0)
    t2 = time.perf_counter()
    for r, f, args in live:
        r.form = _form(f)
        split = f.__dict__.get("__ppy_split__")
        r.breaks = split.describe() if split is not None else []
        reasons = _reasons(f, report)
        r.internal = [why for why in reasons if INTERNAL in why]
        failed = [why for why in reasons if "build failed" in why or "build was interrupted" in why]
        if failed and r.status == MATCH:
            r.status, r.detail = CRASH, failed[0]
        if r.status != MATCH:
            continue
        calls = _parts_calls(f) if r.form == SPLIT else getattr(f, "calls", 0)
        status, detail = _compare(f, tuple(args), wants[r.name])
        r.ran_regions = (_parts_calls(f) if r.form == SPLIT else getattr(f, "calls", 0)) > calls
        if status != MATCH:
            r.status, r.detail = status, detail
    timing.compare = time.perf_counter() - t2
    timing.settle = t2 - t1
    return results, timing


def _compare(f: Any, args: tuple, want: Any) -> tuple[str, str]:
    """The settled function's call against eager's: outputs, inputs after the call, errors, gradients."""
    got = eager._call(f, args, {})
    diffs = eager._diff_runs(got, want)
    if not diffs:
        diffs = eager._diff_grads(got, eager._call(f.__wrapped__, args, {}))
    if diffs:
        for _ in range(5):  # eager disagreeing with itself is not the region's difference
            if eager._diff_runs(eager._call(f.__wrapped__, args, {}), want):
                return NONDETERMINISTIC, "eager differs from itself: " + "; ".join(diffs[:3])
        return MISMATCH, "; ".join(diffs[:5])
    return MATCH, ""


def run(
    n: int, *, batch: int = 500, seed: int = 0, rounds: int = 6, exclude: tuple[str, ...] = (), progress: Any = None
) -> Figures:
    """`n` programs in batches of `batch`: the figures and every result."""
    figures = Figures()
    t0 = time.perf_counter()
    programs = generate(n, seed=seed, exclude=exclude)
    figures.generate_seconds = time.perf_counter() - t0
    if progress is not None:
        progress(f"generated {len(programs)} programs in {time.perf_counter() - t0:.1f} s")
    for start in range(0, len(programs), batch):
        results, timing = run_batch(programs[start : start + batch], start=start, rounds=rounds)
        figures.add(results)
        figures.compile_seconds += timing.compile
        figures.settle_seconds += timing.settle
        figures.compare_seconds += timing.compare
        figures.rounds += timing.rounds
        if progress is not None:
            progress(
                f"{figures.programs}/{len(programs)} programs: {figures.split} split, {figures.matched} matched, "
                f"{figures.mismatched} mismatched, {figures.crashed} crashed, {len(figures.internal)} internal errors"
            )
    return figures
