"""Random straight-line programs over the op table, drawn by hypothesis, for the fuzz.

``fuzz_forms`` lists the ways the fuzz writes an op; ``probe_fuzz`` keeps the ones that
compile and match (one small function each, one build); ``generate_programs`` draws
programs over them (shapes and dtypes tracked on meta tensors, so every program is
valid eager code); ``Program.case`` turns one into a case for ``batch.run_cases``. Used
by tests/test_fuzz.py and benchmarks/fuzz.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from tests.support.batch import BatchStats, Pool, run_cases
from tests.support.outcomes import MATCH, Case, Outcome
from tests.support.source import Params, function_source


@dataclass(frozen=True)
class Form:
    """One way to write an op in a program: a template over operands ``{a}``, ``{b}`` and options ``{d}``, ``{k}``.

    ``arity`` 1 takes one tensor; 2 a tensor and another tensor or a literal (``sides`` says which
    operands may be literals: "tt", "tl", "lt"); "matmul" a tensor and a new weight; "reduce" a
    tensor and a dim. ``ints``: also generated for integer tensors.
    """

    template: str
    arity: Any
    ints: bool = True
    sides: str = "tt"

    @property
    def label(self) -> str:
        return f"{self.template} [{self.sides}]" if self.arity == 2 else self.template


_UNARY_ANY = ("relu", "neg", "abs", "sigmoid", "tanh", "exp", "sin", "cos", "reciprocal", "square", "sign")
_UNARY_FLOAT = ("sqrt", "rsqrt", "log", "log1p", "expm1", "erf", "floor", "ceil", "round", "trunc", "frac")


def fuzz_forms() -> list[Form]:
    """Every op form the fuzzer knows; a probe keeps the ones the compiler supports."""
    forms: list[Form] = []
    for name in _UNARY_ANY + _UNARY_FLOAT:
        ints = name in _UNARY_ANY
        forms += [Form(f"torch.{name}({{a}})", 1, ints), Form(f"{{a}}.{name}()", 1, ints)]
    forms += [
        Form("-{a}", 1),
        Form("F.relu({a})", 1),
        Form("F.silu({a})", 1, False),
        Form("F.gelu({a})", 1, False),
        Form("torch.softmax({a}, dim={d})", 1, False),
        Form("F.softmax({a}, dim={d})", 1, False),
        Form("F.log_softmax({a}, dim={d})", 1, False),
    ]
    for sym in ("+", "-", "*", "/"):
        for sides in ("tt", "tl", "lt"):
            forms.append(Form(f"{{a}} {sym} {{b}}", 2, True, sides))
    for sym in ("//", "%", "**"):
        forms.append(Form(f"{{a}} {sym} {{b}}", 2, False, "tl"))
    for fn in ("add", "sub", "mul", "div", "maximum", "minimum"):
        forms.append(Form(f"torch.{fn}({{a}}, {{b}})", 2, True, "tt"))
        if fn in ("add", "sub", "mul", "div"):
            forms.append(Form(f"torch.{fn}({{a}}, {{b}})", 2, True, "tl"))
            forms.append(Form(f"{{a}}.{fn}({{b}})", 2, True, "tt"))
    forms += [Form("torch.add({a}, {b}, alpha=2)", 2, True, "tt"), Form("torch.sub({a}, {b}, alpha=0.5)", 2, False)]
    forms += [Form("{a} @ {b}", "matmul"), Form("torch.matmul({a}, {b})", "matmul"), Form("{a}.matmul({b})", "matmul")]
    forms += [
        Form("{a}.sum()", "reduce"),
        Form("{a}.sum(dim={d})", "reduce"),
        Form("{a}.sum(dim={d}, keepdim={k})", "reduce"),
        Form("torch.sum({a}, {d}, keepdim={k})", "reduce"),
        Form("{a}.mean(dim={d}, keepdim={k})", "reduce", False),
        Form("torch.mean({a}, {d})", "reduce", False),
        Form("{a}.mean()", "reduce", False),
        Form("{a}.amax(dim={d}, keepdim={k})", "reduce"),
    ]
    return forms


_EVAL_GLOBALS = {"torch": torch, "math": math}


def _eval_globals() -> dict:
    import torch.nn.functional as F

    return {**_EVAL_GLOBALS, "F": F}


def probe_cases(forms: Sequence[Form]) -> list[Case]:
    """One small function per form, on float32 tensors (3x4, with a 4x2 weight for matmul)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for i, form in enumerate(forms):
        params = Params()
        a = params.add(torch.randn(3, 4, generator=g))
        if form.arity == 2:
            a_text, b_text = a, None
            if form.sides == "tt":
                b_text = params.add(torch.randn(4, generator=g))
            elif form.sides == "tl":
                b_text = "0.75"
            else:
                a_text, b_text = "0.75", a
            expr = form.template.format(a=a_text, b=b_text)
        elif form.arity == "matmul":
            expr = form.template.format(a=a, b=params.add(torch.randn(4, 2, generator=g)))
        else:
            expr = form.template.format(a=a, d=-1, k=True)
        name = f"probe{i}"
        cases.append(
            Case(name, function_source(name, params, f"return {expr}"), tuple(params.values), label=form.label)
        )
    return cases


@dataclass(frozen=True)
class FuzzSupport:
    forms: tuple[Form, ...]  # the forms whose probe compiled and matched eager
    tuple_returns: bool  # whether `return a, b` compiles
    outcomes: tuple[Outcome, ...]  # every probe's outcome (a probe mismatch is a failure like any other)


def probe_fuzz(forms: Sequence[Form], stats: BatchStats | None = None, pool: Pool | None = None) -> FuzzSupport:
    """Compile one small function per form (and one tuple return) in one build; keep what matched."""
    cases = probe_cases(forms)
    g = torch.Generator().manual_seed(1)
    cases.append(
        Case(
            "probe_tuple",
            "@ppy.opt(3)\ndef probe_tuple(x0, x1):\n    return x0, x1\n",
            (torch.randn(3, generator=g), torch.randn(2, generator=g)),
            label="tuple return",
        )
    )
    outcomes = run_cases(cases, prefix="ppy-fuzz-probe", stats=stats, pool=pool)
    kept = tuple(f for f, o in zip(forms, outcomes[:-1], strict=True) if o.status == MATCH)
    return FuzzSupport(kept, outcomes[-1].status == MATCH, tuple(outcomes))


@dataclass(frozen=True)
class ParamSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype
    requires_grad: bool


@dataclass(frozen=True)
class Program:
    params: tuple[ParamSpec, ...]
    lines: tuple[str, ...]  # the body, ending with a return
    seed: int

    def case(self, name: str, label: str = "") -> Case:
        decls = Params()
        values = make_inputs(self)
        for v in values:
            decls.add(v)
        return Case(name, function_source(name, decls, list(self.lines)), tuple(values), label=label or name)


def make_inputs(p: Program) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(p.seed)
    out = []
    for spec in p.params:
        if spec.dtype.is_floating_point:
            t = (torch.randn(spec.shape, generator=g, dtype=torch.float64) * 2).to(spec.dtype)
            out.append(t.requires_grad_(spec.requires_grad))
        else:  # no zeros: integer // and % by zero raise
            mag = torch.randint(1, 6, spec.shape, generator=g)
            sign = torch.randint(0, 2, spec.shape, generator=g) * 2 - 1
            out.append((mag * sign).to(spec.dtype))
    return out


_LITERALS = ("0.5", "2", "3", "-1", "1.5", "2.0", "0.1", "-0.25", "1e-3", "7")


def programs_strategy(forms: Sequence[Form], max_statements: int = 6, tuple_returns: bool = False):
    """Hypothesis strategy: one straight-line program over `forms` (shapes and dtypes tracked on meta tensors)."""
    from hypothesis import strategies as st

    float_forms = list(forms)
    int_forms = [f for f in forms if f.ints]

    @st.composite
    def program(draw):
        dtype = draw(
            st.sampled_from(
                [torch.float32, torch.float64, torch.int64] if int_forms else [torch.float32, torch.float64]
            )
        )
        pool_forms = float_forms if dtype.is_floating_point else int_forms
        rank = draw(st.integers(0, 3))
        shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
        specs: list[ParamSpec] = []
        env: dict[str, torch.Tensor] = {}

        def new_param(shape_: tuple[int, ...], dt: torch.dtype) -> str:
            grad = dt.is_floating_point and draw(st.booleans())
            specs.append(ParamSpec(shape_, dt, grad))
            name = f"x{len(specs) - 1}"
            env[name] = torch.empty(shape_, dtype=dt, device="meta")
            return name

        def other_dtype(dt: torch.dtype) -> torch.dtype:
            if dt.is_floating_point and draw(st.integers(0, 5)) == 0:
                return torch.float64 if dt == torch.float32 else torch.float32  # promotion between floats
            return dt

        def broadcastable(s: tuple[int, ...]) -> tuple[int, ...]:
            keep = draw(st.integers(0, len(s)))
            out = [d if draw(st.integers(0, 2)) else 1 for d in s[len(s) - keep :]]
            if draw(st.integers(0, 5)) == 0:
                out.insert(0, draw(st.integers(1, 3)))  # the other operand broadcasts up
            return tuple(out)

        new_param(shape, dtype)
        lines: list[str] = []
        results: list[str] = []
        for i in range(draw(st.integers(1, max_statements))):
            # Mostly the latest result, so that statements chain; then earlier ones and the parameters.
            names = results[::-1] + [n for n in env if n.startswith("x")]
            name = names[draw(st.integers(0, len(names) - 1))]
            expr, value = name, env[name]
            for _ in range(1 + draw(st.integers(0, 1))):  # sometimes nest one op inside another
                usable = [f for f in pool_forms if _applies(f, value)]
                if not usable:
                    break
                form = draw(st.sampled_from(usable))
                nested = expr != name and not form.template.startswith(("torch.", "F."))
                operand = f"({expr})" if nested else expr
                candidate = _instantiate(form, operand, value, draw, st, new_param, broadcastable, other_dtype)
                try:
                    got = eval(candidate, _eval_globals(), dict(env))  # noqa: S307 - our own generated text
                except Exception:  # noqa: BLE001 - invalid in eager too (e.g. an op without int support): skip
                    break
                if not isinstance(got, torch.Tensor):
                    break
                expr, value = candidate, got
            if expr == name:
                continue
            target = f"t{i}"
            env[target] = value
            results.append(target)
            lines.append(f"{target} = {expr}")
        if not results:
            results = ["x0"]
        if tuple_returns and len(results) > 1 and draw(st.integers(0, 4)) == 0:
            ret = f"return {results[-1]}, {draw(st.sampled_from(results[:-1]))}"
        else:
            ret = f"return {results[-1]}"
        seed = draw(st.integers(0, 2**31 - 1))
        return Program(tuple(specs), tuple(lines) + (ret,), seed)

    return program()


def _applies(form: Form, a: torch.Tensor) -> bool:
    if form.arity == "matmul":
        return a.dim() >= 1
    if "{d}" in form.template:
        return a.dim() >= 1
    return True


def _instantiate(
    form: Form, name: str, a: torch.Tensor, draw: Any, st: Any, new_param: Any, broadcastable: Any, other_dtype: Any
) -> str:
    if form.arity == 2:
        if form.sides == "tt":
            b = new_param(broadcastable(tuple(a.shape)), other_dtype(a.dtype))
            first, second = (name, b) if draw(st.booleans()) else (b, name)
            return form.template.format(a=first, b=second)
        lit = draw(st.sampled_from(_LITERALS))
        if form.template.endswith("** {b}"):
            lit = draw(st.sampled_from(("2", "0.5", "3", "-1", "1.5")))
        return form.template.format(a=name, b=lit) if form.sides == "tl" else form.template.format(a=lit, b=name)
    if form.arity == "matmul":
        k = a.shape[-1]
        w_shape = (k,) if draw(st.integers(0, 4)) == 0 else (k, draw(st.integers(1, 4)))
        return form.template.format(a=name, b=new_param(w_shape, a.dtype))
    d = draw(st.integers(-a.dim(), max(a.dim() - 1, -a.dim()))) if a.dim() else 0
    return form.template.format(a=name, d=d, k=draw(st.booleans()))


def generate_programs(
    forms: Sequence[Form], n: int, seed: int | None = None, max_statements: int = 6, tuple_returns: bool = False
) -> list[Program]:
    """`n` distinct programs drawn by hypothesis: the same every run unless a seed is given.

    Hypothesis repeats small examples, so rounds with further seeds top the list up
    until `n` programs differ in their text or their parameters' shapes and dtypes.
    """
    found: list[Program] = []
    seen: set = set()
    for round_ in range(50):
        if len(found) >= n:
            break
        round_seed = seed if round_ == 0 else (seed or 0) * 1000 + round_
        want = max(2 * (n - len(found)), 100)  # a small round would only redraw the simplest programs
        for p in _draw_programs(forms, want, round_seed, max_statements, tuple_returns):
            key = (p.lines, p.params)
            if key not in seen:
                seen.add(key)
                found.append(p)
    return found[:n]


def _draw_programs(
    forms: Sequence[Form], n: int, seed: int | None, max_statements: int, tuple_returns: bool
) -> list[Program]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    drawn: list[Program] = []

    @settings(
        max_examples=n,
        deadline=None,
        derandomize=seed is None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs_strategy(forms, max_statements, tuple_returns))
    def collect(p: Program) -> None:
        drawn.append(p)

    if seed is not None:
        collect = hypothesis_seed(seed)(collect)
    collect()
    return drawn


def program_text(p: Program, name: str = "f") -> str:
    return function_source(name, _decls(len(p.params)), list(p.lines))


def _decls(n: int) -> Params:
    params = Params()
    for _ in range(n):
        params.add(None)
    return params
