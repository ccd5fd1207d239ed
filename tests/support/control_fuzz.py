"""Random programs with control flow for the differential fuzz: branches on tensor values, loops, lists.

Each program works on tensors of one shape and floating dtype (so that every statement is
valid whichever way a branch goes): elementwise expressions; ``if``/``else`` and conditional
expressions on a tensor's value (``x.sum() > 0.5``, ``(a < b).all()``, ``x.mean().item() > 0``,
``and``/``or``/``not`` of those); ``for`` over ``range``, over a tensor's rows, over
``enumerate`` of a list; ``while`` loops with a counter; ``break``, ``continue`` and ``else``
clauses; a list of tensors built with ``append``, indexed, popped, summed, stacked, filtered
by a comprehension, reduced by ``any``/``max``; numbers from ``.item()`` and ``float()``.
Generation is deterministic for a seed; a program eager rejects is drawn again (a few times).
``tests/test_fuzz_control.py`` runs a CI-sized batch, ``python -m benchmarks.fuzz --control``
the large one.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from tests.support.outcomes import Case
from tests.support.source import Params, function_source

UNARY = (
    "torch.tanh({a})",
    "torch.sigmoid({a})",
    "{a}.relu()",
    "-{a}",
    "{a}.abs()",
    "torch.sin({a})",
    "{a} * 0.5",
    "{a} + 1.5",
    "{a}.exp().clamp(max=50.0)",
    "{a}.square()",
    "F.silu({a})",
    "{a} / 3",
    "2 - {a}",
    "{a}.softmax(-1)",
    "{a}.cumsum(-1)",
    "{a}.flip(-1)",
)
BINARY = (
    "{a} + {b}",
    "{a} - {b}",
    "{a} * {b}",
    "torch.maximum({a}, {b})",
    "torch.where({a} > {b}, {a}, {b})",
    "{a} * 0.25 + {b}",
)
LITERALS = ("0.0", "0.5", "-0.5", "1.0", "2.0", "-1.5")
CONDITIONS = (
    "{a}.sum() > {lit}",
    "({a} > {lit}).any()",
    "({a} < {b}).all()",
    "{a}.mean().item() > {lit}",
    "float({a}.max()) < {lit}",
    "bool({a}.abs().max() > {lit})",
    "not ({a}.min() > {lit})",
    "{a}.sum() > 0 and {b}.sum() < {lit}",
    "{a}.max() > {lit} or {b}.min() < {lit}",
    "{a}.numel() > 2 and {a}.mean() > {lit}",
    "({a} - {b}).abs().max().item() < {lit}",
)


@dataclass(frozen=True)
class ControlProgram:
    shape: tuple[int, ...]
    dtype: torch.dtype
    grads: tuple[bool, bool]
    lines: tuple[str, ...]
    seed: int

    @property
    def params(self) -> tuple:
        return (self.shape, self.dtype, self.grads)

    def inputs(self) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed)
        out = []
        for grad in self.grads:
            t = (torch.randn(self.shape, generator=g, dtype=torch.float64) * 1.5).to(self.dtype)
            out.append(t.requires_grad_(grad))
        return out

    def case(self, name: str, label: str = "") -> Case:
        params = Params()
        values = self.inputs()
        for v in values:
            params.add(v)
        return Case(name, function_source(name, params, list(self.lines)), tuple(values), label=label or name)

    def text(self, name: str = "f") -> str:
        return f"def {name}(x0, x1):\n" + "".join(f"    {ln}\n" for ln in self.lines)


class _Writer:
    """One program being drawn: the lines so far, the tensor names bound at each point, the loops around."""

    def __init__(self, rng: random.Random, rank: int):
        self.rng = rng
        self.rank = rank
        self.lines: list[str] = []
        self.counter = 0
        self.budget = rng.randint(4, 12)  # statements in all

    def name(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, depth: int, text: str) -> None:
        for ln in text.split("\n"):
            self.lines.append("    " * depth + ln)

    def expr(self, names: list[str]) -> str:
        r = self.rng
        text = r.choice(names)
        for _ in range(r.randint(1, 2)):
            if r.random() < 0.6:
                form = r.choice(UNARY)
                if self.rank == 0 and form.endswith(("softmax(-1)", "cumsum(-1)", "flip(-1)")):
                    continue  # they need a dimension
                text = form.format(a=f"({text})" if not form.startswith(("torch.", "F.")) else text)
            else:
                other = r.choice(names)
                a, b = (text, other) if r.random() < 0.5 else (other, text)
                form = r.choice(BINARY)
                text = form.format(a=f"({a})", b=f"({b})")
        return text

    def cond(self, names: list[str]) -> str:
        r = self.rng
        return r.choice(CONDITIONS).format(a=r.choice(names), b=r.choice(names), lit=r.choice(LITERALS))

    def block(self, depth: int, names: list[str], loops: list[str], nesting: int) -> list[str]:
        """Statements at `depth`; returns the tensor names bound after them (`names` and new ones)."""
        names = list(names)
        for k in range(self.rng.randint(1, 3)):
            if k and self.budget <= 0:
                break
            self.budget -= 1
            before = len(self.lines)
            names = self.statement(depth, names, loops, nesting if self.budget > 0 else 2)
            if len(self.lines) == before:  # nothing written (a skipped kind): a block needs a statement
                target = self.rng.choice(names)
                self.emit(depth, f"{target} = {self.expr(names)}")
        return names

    def statement(self, depth: int, names: list[str], loops: list[str], nesting: int) -> list[str]:
        r = self.rng
        kinds = ["assign", "assign", "reassign", "append", "read_list", "ifexp", "number"]
        if nesting < 2:
            kinds += ["if", "if", "for_range", "for_rows", "for_list", "while", "comprehension", "reduce"]
        if loops:
            kinds += ["jump"]
        kind = r.choice(kinds)
        if kind == "assign":
            new = self.name()
            self.emit(depth, f"{new} = {self.expr(names)}")
            return names + [new]
        if kind == "reassign":
            target = r.choice([n for n in names if n.startswith("t")] or names)
            self.emit(depth, f"{target} = {self.expr(names)}")
            return names
        if kind == "append":
            if "ys" in loops:  # never grow the list a loop walks
                return names
            self.emit(depth, f"ys.append({self.expr(names)})")
            return names
        if kind == "read_list":
            new = self.name()
            reader = r.choice(
                (
                    "ys[-1]",
                    "ys[0]",
                    "ys[len(ys) // 2]",
                    "torch.stack(ys).sum(0)",
                    "torch.stack(ys).mean(0)",
                    "sum(ys[1:], ys[0])",
                    "torch.stack(ys[::2]).amax(0)",
                )
            )
            self.emit(depth, f"{new} = {reader}")
            if "ys" not in loops and r.random() < 0.3:
                self.emit(depth, "if len(ys) > 1:\n    ys.pop()")
            return names + [new]
        if kind == "ifexp":
            new = self.name()
            a, b = self.expr(names), self.expr(names)
            self.emit(depth, f"{new} = {a} if {self.cond(names)} else {b}")
            return names + [new]
        if kind == "number":
            v = self.name("v")
            self.emit(depth, f"{v} = {r.choice(names)}.{r.choice(('mean', 'sum', 'amax'))}().item()")
            target = r.choice(names)
            if r.random() < 0.5:
                self.emit(depth, f"{target} = {target} * {v}" if r.random() < 0.5 else f"{target} = {v} - {target}")
            else:
                self.emit(depth, f"if {v} > {r.choice(LITERALS)}:\n    {target} = {self.expr(names)}")
            return names
        if kind == "if":
            self.emit(depth, f"if {self.cond(names)}:")
            then = self.block(depth + 1, names, loops, nesting + 1)
            if r.random() < 0.8:
                self.emit(depth, "else:")
                orelse = self.block(depth + 1, names, loops, nesting + 1)
                return names + [n for n in then if n not in names and n in orelse]
            return names
        if kind in ("for_range", "for_rows", "for_list", "while"):
            return self.loop(kind, depth, names, loops, nesting)
        if kind == "comprehension":
            zs, new = self.name("zs"), self.name()
            y = self.name("y")
            elem = self.expr(names + [y])
            self.emit(depth, f"{zs} = [{elem} for {y} in ys if {self.cond([y])}]")
            self.emit(depth, f"{new} = torch.stack({zs}).sum(0) if {zs} else {r.choice(names)}")
            return names + [new]
        if kind == "reduce":
            y, new = self.name("y"), self.name()
            if r.random() < 0.5:
                c = self.name("c")
                self.emit(depth, f"{c} = any({y}.sum() > {r.choice(LITERALS)} for {y} in ys)")
                self.emit(depth, f"{new} = {self.expr(names)} if {c} else {r.choice(names)}")
            else:
                self.emit(depth, f"{new} = {r.choice(names)} * max({y}.abs().max() for {y} in ys)")
            return names + [new]
        if kind == "jump":
            self.emit(depth, f"if {self.cond(names)}:\n    {r.choice(('break', 'continue'))}")
            return names
        raise AssertionError(kind)

    def loop(self, kind: str, depth: int, names: list[str], loops: list[str], nesting: int) -> list[str]:
        r = self.rng
        walks = ""
        if kind == "for_range":
            i = self.name("i")
            bound = r.choice(["3", "2", "0", "len(ys)"] + (["x0.size(0)"] if self.rank else []))
            self.emit(depth, f"for {i} in range({bound}):")
        elif kind == "for_rows" and self.rank:
            row = self.name("row")
            self.emit(depth, f"for {row} in {r.choice(names)}:")
            target = r.choice(names)
            self.emit(depth + 1, f"{target} = {target} * 0.5 + {r.choice(UNARY).format(a=row)}")
        elif kind == "for_list":
            k, y = self.name("k"), self.name("y")
            self.emit(depth, f"for {k}, {y} in enumerate(ys):")
            target = r.choice(names)
            self.emit(depth + 1, f"{target} = {target} + {y} * {k}")
            walks = "ys"
        else:
            k = self.name("k")
            self.emit(depth, f"{k} = 0")
            self.emit(depth, f"while {k} < {r.randint(1, 4)} and ({self.cond(names)}):")
            self.emit(depth + 1, f"{k} += 1")
        self.block(depth + 1, names, loops + [walks or kind], nesting + 1)
        if r.random() < 0.25:
            self.emit(depth, "else:")
            target = r.choice(names)
            self.emit(depth + 1, f"{target} = {self.expr(names)}")
        return names


def draw(seed: int) -> ControlProgram:
    """One program, the same for the same seed."""
    r = random.Random(seed)
    rank = r.randint(0, 3)
    shape = tuple(r.randint(1, 4) for _ in range(rank))
    dtype = r.choice((torch.float32, torch.float64))
    w = _Writer(r, rank)
    w.emit(0, "ys = [x0]")
    names = w.block(0, ["x0", "x1"], [], 0)
    while w.budget > 0:
        w.budget -= 1
        names = w.statement(0, names, [], 0)
    last = names[-1]
    ret = r.choice(
        (
            f"return {last}",
            f"return {last}, torch.stack(ys)",
            "return ys",
            f"return {last}, len(ys)",
            f"return {last}.sum().item(), ys[-1]",
        )
    )
    w.emit(0, ret)
    grads = (r.random() < 0.5, r.random() < 0.5)
    return ControlProgram(shape, dtype, grads, tuple(w.lines), seed)


def runs_in_eager(p: ControlProgram) -> bool:
    import torch.nn.functional as F

    ns = {"torch": torch, "F": F, "math": math}
    exec(compile(p.text(), "<control-fuzz>", "exec"), ns)  # noqa: S102 - our own generated text
    try:
        ns["f"](*p.inputs())
    except Exception:  # noqa: BLE001 - rejected by eager: drawn again
        return False
    return True


def generate(n: int, seed: int = 0) -> list[ControlProgram]:
    """`n` distinct programs (text or inputs differ) that eager runs without an error."""
    found: list[ControlProgram] = []
    seen: set = set()
    k = 0
    while len(found) < n and k < 20 * n + 100:
        p = draw(seed * 1_000_003 + k)
        k += 1
        key = (p.lines, p.params)
        if key in seen or not runs_in_eager(p):
            continue
        seen.add(key)
        found.append(p)
    return found
