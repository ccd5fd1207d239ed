"""The language's front door: every rule on a whole function refuses with one located format.

No build: the front end only. (What the refusals look like in a cell's output is
tested in test_bad_input.py; that they still run as Python, too.)
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import ppy_magic
from ppy_magic.errors import CompileError
from ppy_magic.language import frontend, ir
from ppy_magic.language.function import FunctionCompiler
from ppy_magic.language.ir import Kind
from ppy_magic.language.namespace import collect_globals, function_key

SOURCE = textwrap.dedent(
    """\
    import functools
    import ppy

    LEVEL = 2

    @ppy.opt(3)
    async def is_async(x):
        return x

    @ppy.opt(3)
    def is_generator(x):
        yield x

    @ppy.opt(3)
    def recursive(x, n: int):
        return recursive(x, n - 1) if n else x

    @functools.lru_cache
    @ppy.opt(3)
    def decorated_twice(x):
        return x

    @ppy.opt(3)
    def star_args(x, *more):
        return x

    @ppy.opt(3)
    def star_kwargs(x, **options):
        return x

    @ppy.opt(3)
    def keyword_only(x, *, scale: float = 2.0):
        return x * scale

    @ppy.opt(3)
    def positional_only(x, /, y):
        return x + y

    @ppy.opt(LEVEL)
    def level_not_literal(x):
        return x

    @ppy.opt(3)
    def fine(x):
        return x + 1

    def outer():
        @ppy.opt(3)
        def nested(x):
            return x
        return nested
    """
)
LINES = SOURCE.splitlines()

REFUSED = [
    # function, message, the source text the caret must cover exactly
    ("is_async", "an async function cannot be a region", "async def is_async(x):"),
    ("is_generator", "a generator cannot be a region", "def is_generator(x):"),
    ("recursive", "a region cannot call itself", "recursive(x, n - 1)"),
    ("decorated_twice", "a region cannot have other decorators", "functools.lru_cache"),
    ("keyword_only", "keyword-only and positional-only parameters", "scale: float"),
    ("positional_only", "keyword-only and positional-only parameters", "x"),
    ("level_not_literal", "must be an int literal from 0 to 4", "LEVEL"),
]


@pytest.fixture(scope="module")
def decorated():
    tree = ast.parse(SOURCE)
    g = collect_globals(tree, {})
    top, nested = frontend.decorated_functions(tree, g)
    return g, {node.name: (node, level) for node, level in top}, nested


@pytest.mark.parametrize("name, message, covered", REFUSED, ids=[r[0] for r in REFUSED])
def test_each_rule_refuses_with_a_located_caret_under_the_whole_node(decorated, name, message, covered):
    g, top, _ = decorated
    node, level = top[name]
    with pytest.raises(CompileError) as info:
        frontend.compile_decorated(node, g, "<cell>", LINES, level)
    err = info.value
    assert message in err.message and err.hint and err.function == name
    line = LINES[err.loc.line - 1]
    assert line[err.loc.col : err.loc.end_col] == covered, (line, err.loc)
    assert err.reason.startswith(f"at {err.loc.line}:{err.loc.col + 1}: ")
    shown = str(err).splitlines()
    assert shown[1] == "    " + line
    assert shown[2] == "    " + " " * err.loc.col + "^" * len(covered)


def test_a_function_that_passes_the_rules_compiles_and_level_0_never_does(decorated):
    g, top, _ = decorated
    node, level = top["fine"]
    fn = frontend.compile_decorated(node, g, "<cell>", LINES, level)
    assert isinstance(fn, ir.Function) and (fn.name, fn.first_line) == function_key(node)
    assert frontend.compile_decorated(node, g, "<cell>", LINES, 0) is None


def test_star_args_and_kwargs_the_body_ignores_are_ignored_by_the_region(decorated):
    g, top, _ = decorated
    for name, extras in (("star_args", 1), ("star_kwargs", 2)):
        node, level = top[name]
        fn = frontend.compile_decorated(node, g, "<cell>", LINES, level)
        assert fn.extras == extras and [p.name for p in fn.params] == ["x"]


def test_a_nested_function_is_refused_at_its_def(decorated):
    _, _, nested = decorated
    ((node, level),) = nested
    err = frontend.not_top_level(node, "<cell>", LINES)
    assert level == 3 and "only top-level functions" in err.message
    assert LINES[err.loc.line - 1][err.loc.col : err.loc.end_col] == "def nested(x):"


def test_one_key_for_the_def_and_the_function_it_makes():
    namespace: dict = {}
    exec(compile(SOURCE, "<keys>", "exec"), namespace)  # noqa: S102 - the test's own source
    tree = ast.parse(SOURCE)
    nodes = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for name in ("fine", "decorated_twice", "is_async"):
        fn = namespace[name]
        fn = getattr(fn, "__wrapped__", fn)  # lru_cache
        assert function_key(nodes[name]) == function_key(fn) == (name, nodes[name].decorator_list[0].lineno)
    assert function_key(object()) == ("", 0)


# ---- the compiler's shape ----------------------------------------------------------------------------


class CountingCompiler(FunctionCompiler):
    made: list[str] = []

    def __init__(self, fn, *args, **kwargs):
        type(self).made.append(fn.name)
        super().__init__(fn, *args, **kwargs)


def test_a_callee_is_compiled_by_the_callers_own_compiler_class():
    from ppy_magic.language.function import Context

    source = textwrap.dedent(
        """\
        import torch
        import torch.nn.functional as F
        import ppy

        @ppy.opt(3)
        def helper(x):
            return x * 2

        @ppy.opt(3)
        def caller(x):
            return F.softmax(helper(x), dim=-1)
        """
    )
    tree = ast.parse(source)
    g = collect_globals(tree, {})
    node = tree.body[-1]
    CountingCompiler.made = []
    comp = CountingCompiler(node, g, "<c>", source.splitlines(), Context(), region_name="caller")
    comp.locals["x"] = comp.new_var("x", Kind.TENSOR)
    comp.compile_body(node.body)
    assert CountingCompiler.made == ["caller", "helper", "softmax"]  # the adapter too
    assert [h.symbol.split("_", 3)[-1] for h in comp.ctx.helpers] == ["helper", "softmax"]


def test_a_nested_block_gives_back_the_enclosing_scope_even_when_it_fails():
    from ppy_magic.language.function import Context

    node = ast.parse("def f(x):\n    return x\n").body[0]
    comp = FunctionCompiler(node, collect_globals(ast.parse(""), {}), "<c>", [], Context(), region_name="f")
    x = comp.new_var("x", Kind.TENSOR)
    comp.locals["x"] = x
    body = comp.body
    with comp.block() as inner:
        comp.locals["y"] = comp.intrinsic("tensor_dim", Kind.INT, x)
        comp.terminated = True
    assert comp.body is body and body == [] and comp.locals == {"x": x} and not comp.terminated
    assert inner.terminated and set(inner.locals) == {"x", "y"} and len(inner.body) == 1
    with pytest.raises(RuntimeError), comp.block({"z": x}):
        assert comp.locals == {"z": x}
        raise RuntimeError
    assert comp.body is body and comp.locals == {"x": x}


def test_the_language_package_imports_one_way():
    """No module of the language imports another that imports it back, nor the backend."""
    root = Path(ppy_magic.__file__).parent / "language"
    graph = {}
    for path in root.glob("*.py"):
        deps = set()
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom) and n.level == 1:
                deps |= {n.module} if n.module else {a.name for a in n.names}
            if isinstance(n, ast.ImportFrom) and n.level == 2:
                assert n.module != "backend" and not (n.module or "").startswith("backend."), path.name
        graph[path.stem] = {d.split(".")[0] for d in deps}

    def reaches(start: str, target: str, seen: set) -> bool:
        return any(d == target or (d not in seen and reaches(d, target, seen | {d})) for d in graph.get(start, ()))

    cycles = sorted(m for m in graph if reaches(m, m, {m}))
    assert not cycles, cycles
    assert "frontend" not in graph["calls"] and "function" not in graph["calls"]
