"""The backend is the only writer of C++: its tables against the language's, and the text it writes.

No build: these tests run the front end and the code generator only.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ppy_magic
from ppy_magic import backend
from ppy_magic.backend import cpp
from ppy_magic.errors import CompileError
from ppy_magic.language import frontend, ir, values
from ppy_magic.language.ir import Kind
from ppy_magic.language.namespace import collect_globals
from ppy_magic.torchlib.schemas import overloads

PACKAGE = Path(ppy_magic.__file__).parent
CPP_TOKENS = re.compile(r"\b(at|c10|std|torch|ppy)::|(?<![\w:])::std::")


def generate(source: str) -> backend.CellCode:
    """The C++ of the functions of `source` that compile (the rest stay Python)."""
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    g = collect_globals(tree, {})
    functions = []
    for node, level in frontend.decorated_functions(tree, g)[0]:
        with contextlib.suppress(CompileError):
            functions.append(frontend.compile_function(node, g, "<codegen>", source.splitlines(), level))
    return backend.generate(functions)


def cell_of(test_file: str, name: str = "CELL") -> str:
    tree = ast.parse(Path(__file__).with_name(test_file).read_text(encoding="utf-8"))
    return next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name
    )


def test_cpp_text_is_written_by_the_backend_only():
    """C++ names appear in the Python sources (code, strings, comments) of ppy_magic/backend/ only."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "backend":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CPP_TOKENS.search(line):
                offenders.append(f"ppy_magic/{rel}:{n}: {line.strip()}")
    assert not offenders, "C++ outside the backend:\n" + "\n".join(offenders)
    assert CPP_TOKENS.search((PACKAGE / "backend" / "cpp.py").read_text())  # the scan would see it


def test_every_intrinsic_of_the_language_has_one_spelling():
    assert set(ir.INTRINSICS) == set(cpp.INTRINSICS)
    for name, template in cpp.INTRINSICS.items():
        if isinstance(template, str):
            n = len(set(re.findall(r"\{(\d+)\}", template)))
            assert cpp.intrinsic(name, [f"a{i}" for i in range(n)]), name


def test_every_constant_and_kind_has_a_spelling():
    assert set(values.ENUM_CONSTANTS) == set(cpp.ENUM_CONSTANTS)
    for obj in values.ENUM_CONSTANTS:
        assert backend.codegen.cpp_literal(obj, Kind.ENUM).startswith("at::")
    for kind in Kind:
        if kind not in (Kind.NONE, Kind.ENUM, Kind.CONSTANT, *ir.VARIANTS):  # never the kind of a variable
            assert cpp.cpp_type(kind)
    with pytest.raises(ValueError, match="no C.. type"):
        cpp.cpp_type(Kind.NONE)


def test_an_unknown_intrinsic_fails_the_code_generation_loudly():
    x = ir.Var("x", Kind.TENSOR)
    t = ir.Var("t", Kind.INT, temp=True)

    def function(value: ir.Intrinsic) -> ir.Function:
        body = (ir.Assign((t,), value, 2), ir.Return((x,), "T", 3))
        return ir.Function("f", "f", (ir.Param("x", Kind.TENSOR),), body, 3, "<f>", 1, 1)

    assert "v_x.numel()" in backend.generate([function(ir.Intrinsic("tensor_numel", (x,)))]).text
    with pytest.raises(cpp.UnknownIntrinsic, match="no C.. for the intrinsic 'tensor_frobnicate'"):
        backend.generate([function(ir.Intrinsic("tensor_frobnicate", (x,)))])
    with pytest.raises(cpp.UnknownIntrinsic, match="takes 1 operands, got 2"):
        backend.generate([function(ir.Intrinsic("tensor_numel", (x, x)))])


def test_kinds_are_an_enum_whose_values_are_the_runtimes_letters():
    assert [k.value for k in (Kind.TENSOR, Kind.FLOAT, Kind.INT, Kind.BOOL, Kind.STR)] == ["T", "f", "i", "b", "s"]
    assert Kind("O") is Kind.OPT_TENSOR and Kind("L") is Kind.TENSORS
    code = generate(
        """
        import torch
        import ppy

        @ppy.opt(3)
        def f(x, a: float, n: int, flag: bool, bias: torch.Tensor | None = None):
            return x
        """
    )
    (spec,) = code.regions
    # a float parameter holds an int or a float: an int stays an int in it (Kind.INT_OR_FLOAT)
    assert spec.kinds == "TFibO" and type(spec.kinds) is str and spec.ret == "T"
    assert json.loads(json.dumps({"kinds": spec.kinds})) == {"kinds": "TFibO"}


SPELLING_CELL = """
import math
import torch
import ppy

@ppy.opt(3)
def uses_everything(x, bias: torch.Tensor | None, k: int, a: float):
    B, *rest = x.shape
    n = len(rest) + x.size(0) // k - abs(-k)
    if bias is not None:
        x = x + bias
    y = x[1:, None, ..., ::2].contiguous(memory_format=torch.contiguous_format)
    s = f"{n} {a}"
    if s == "x" or math.sqrt(a) > n:
        y = y * 2.0
    return y.sum(dim=-1), x.shape[1:], float(n) / a
"""


def test_generated_cpp_spells_each_type_one_way():
    text = generate(SPELLING_CELL).text
    for wanted in ("std::optional<at::Tensor>", "std::nullopt", "ppy::seq_slice", "at::MemoryFormat::Contiguous"):
        assert wanted in text, wanted
    assert "c10::optional" not in text
    assert not re.search(r"(?<![\w:])::std::", text)


def test_generated_cpp_is_the_same_in_every_process():
    """The TU is the cache key: a new kernel (another hash seed) must write it again byte for byte."""
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        from test_codegen import SPELLING_CELL, cell_of, generate
        cells = (SPELLING_CELL, cell_of("test_language.py"), cell_of("test_models.py"))
        sys.stdout.write("".join(generate(cell).text for cell in cells))
        """
    )
    here = os.path.dirname(__file__)
    texts = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join([here, str(PACKAGE.parent)])}
        out = subprocess.run([sys.executable, "-c", script, here], env=env, capture_output=True, text=True, check=True)
        texts.add(out.stdout)
    assert len(texts) == 1
    assert texts.pop().count("ppy_regions[]") == 3


def test_an_aten_call_names_its_overload_and_header():
    (ov,) = [o for o in overloads("add") if o.overload == "Tensor"]
    assert cpp.op_call(ov) == "at::_ops::add_Tensor::call"
    assert cpp.op_header(ov) == "ATen/ops/add_ops.h"
    (inplace,) = [o for o in overloads("add_") if o.overload == "Tensor"]
    assert cpp.op_header(inplace) == "ATen/ops/add_ops.h"


def test_each_python_line_maps_to_the_cpp_it_became():
    code = generate(
        """
        import torch, ppy

        @ppy.opt(3)
        def scaled(x, w):
            h = x @ w
            return torch.relu(h) * 0.5
        """
    )
    (spec,) = code.regions
    by_line = backend.cpp_by_line(spec.cpp)
    assert sorted(by_line) == [6, 7]  # the two statements; the def and the decorator become no code
    assert any(re.search(r"at::_ops::matmul::call\(", s) for s in by_line[6])
    calls = [s for s in by_line[7] if "::call(" in s]
    assert len(calls) == 2 and "::relu::" in calls[0] and "::mul_" in calls[1]  # in eager's order
    assert not any(s.startswith(("}", "catch", "ppy_line")) for lines in by_line.values() for s in lines)


def test_a_loop_line_maps_to_its_calls_not_to_interrupt_polls():
    code = generate(
        """
        import torch, ppy

        @ppy.opt(3)
        def steps(x, n: int):
            for _ in range(n):
                x = torch.tanh(x) + 1.0
            return x
        """
    )
    (spec,) = code.regions
    assert "ppy::poll(" in spec.cpp  # the loop polls for interrupts once per iteration
    by_line = backend.cpp_by_line(spec.cpp)
    assert any("at::_ops::tanh" in s for s in by_line[7]) and any("::add_" in s for s in by_line[7])
    assert not any("ppy::poll(" in s for lines in by_line.values() for s in lines)
