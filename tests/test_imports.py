"""``import mymodel`` in a kernel with the extension loaded, or under ``ppy run``, compiles the file like a cell.

Each notebook runs in a subprocess (a fresh interpreter: its own ``sys.meta_path``,
``sys.modules`` and memory cache, the session's disk cache from ``PPY_CACHE_DIR``),
with the files of one package directory on ``sys.path``. The files are the same in
every test, so the module builds once for the session (``reloadable`` builds once
more, for its changed source); every later process loads it from the disk cache.
"""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
import textwrap

import pytest

from ppy_magic import imports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MYMODEL = """\
import torch
from torch import nn
import ppy


@ppy.opt
def scale(x, w):
    return torch.relu(x @ w) * 2.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    @ppy.opt(3)
    def forward(self, x):
        return torch.tanh(self.lin(x)) + 1.0
"""

# Not a region: a region cannot call itself (a whole-function rule, so not tried again at calls either).
RECURSIVE = """\
import torch
import ppy


@ppy.opt(3{strict})
def countdown(x, n: int):
    if n == 0:
        return x
    return countdown(x + 1, n - 1)
"""

FILES = {
    "mymodel.py": MYMODEL,
    "reloadable.py": MYMODEL,
    "recursive.py": RECURSIVE.format(strict=""),
    "strictmod.py": RECURSIVE.format(strict=", strict=True"),
    "syntaxbad.py": "import ppy\n\n@ppy.opt(3)\ndef f(x):\n    return (x +\n",
    # A decorator named like ours and a mention of `ppy.opt` in a comment, but no import of ppy: left alone.
    "plain.py": "import functools\n\n# not @ppy.opt\n@functools.lru_cache\ndef opt(x):\n    return x\n",
    "main.py": textwrap.dedent("""\
        import torch
        import mymodel

        x, w = torch.randn(2, 4), torch.randn(4, 4)
        net = mymodel.Net()
        print("regions", mymodel.scale.__ppy_region__, type(net).__dict__["forward"].__ppy_region__)
        print("equal", torch.equal(mymodel.scale(x, w), mymodel.scale.__wrapped__(x, w)),
              torch.equal(net(x), mymodel.Net.forward.__wrapped__(net, x)), mymodel.Net.forward.calls)
    """),
}

NOTEBOOK = """\
import json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "ppy_magic")
sys.path.insert(0, sys.argv[1])
facts = shell.user_ns["facts"] = {}
errors = []
for cell in json.loads(sys.argv[2]):
    result = shell.run_cell(cell)
    error = result.error_before_exec or result.error_in_exec
    errors.append(None if error is None else [type(error).__name__, str(error)])
print("FACTS " + json.dumps({"facts": facts, "errors": errors}))
"""

# What the first cells of most notebooks check: the function and the method are regions, equal to eager.
REGIONS = textwrap.dedent("""\
    import torch
    x, w = torch.randn(2, 4), torch.randn(4, 4)
    net = mymodel.Net()
    forward = type(net).__dict__["forward"]
    facts["loader"] = type(mymodel.__loader__).__name__
    facts["regions"] = [getattr(mymodel.scale, "__ppy_region__", False), getattr(forward, "__ppy_region__", False)]
    facts["equal"] = [
        torch.equal(mymodel.scale(x, w), mymodel.scale.__wrapped__(x, w)),
        torch.equal(net(x), forward.__wrapped__(net, x)),
    ]
    facts["calls"] = [mymodel.scale.calls, forward.calls]
""")


@pytest.fixture(scope="module")
def pkg(tmp_path_factory):
    root = tmp_path_factory.mktemp("imports")
    for name, text in FILES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def notebook(pkg, *cells: str) -> tuple[dict, list, str]:
    """Run `cells` in a fresh kernel-like shell with the extension loaded and `pkg` on sys.path."""
    proc = subprocess.run(
        [sys.executable, "-c", NOTEBOOK, str(pkg), json.dumps(cells)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("FACTS "))
    got = json.loads(line[len("FACTS ") :])
    return got["facts"], got["errors"], out


def test_import_compiles_the_functions_and_methods_of_a_file(pkg):
    facts, errors, out = notebook(pkg, "import mymodel", REGIONS)
    assert errors == [None, None], out
    assert facts["loader"] == "RegionLoader"
    assert facts["regions"] == [True, True], out
    assert facts["equal"] == [True, True]
    assert facts["calls"] == [1, 1]  # the regions ran (not their Python bodies)
    assert "ppy: mymodel: 2 regions (scale, Net.forward)" in out, out


def test_a_second_process_loads_the_module_from_the_disk_cache_not_from_bytecode(pkg):
    py_compile.compile(str(pkg / "mymodel.py"), doraise=True)  # a __pycache__ entry the plain loader would use
    notebook(pkg, "import mymodel")  # built here, or already on disk
    facts, errors, out = notebook(pkg, "import mymodel", REGIONS)
    assert errors == [None, None], out
    assert facts["regions"] == [True, True], out
    assert "ppy: mymodel: 2 regions (scale, Net.forward) loaded from the disk cache" in out, out
    assert " built in " not in out and "building" not in out, out


def test_without_the_extension_the_file_imports_as_plain_python(pkg):
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import mymodel; "
         "print(type(mymodel.__loader__).__name__, getattr(mymodel.scale, '__ppy_region__', False))", str(pkg)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert proc.stdout.split() == ["SourceFileLoader", "False"], proc.stdout + proc.stderr


def test_reload_compiles_the_file_again(pkg):
    change = textwrap.dedent(f"""\
        import importlib, pathlib, torch
        first = reloadable.scale
        importlib.reload(reloadable)
        facts["unchanged"] = [reloadable.scale is not first, reloadable.scale.__ppy_region__]
        path = pathlib.Path({str(pkg / "reloadable.py")!r})
        path.write_text(path.read_text().replace("* 2.0", "* 3.0"))
        importlib.reload(reloadable)
        x, w = torch.randn(2, 4), torch.randn(4, 4)
        y = reloadable.scale(x, w)
        facts["changed"] = [reloadable.scale.__ppy_region__, torch.equal(y, torch.relu(x @ w) * 3.0)]
        facts["calls"] = reloadable.scale.calls
        path.write_text(path.read_text().replace("* 3.0", "* 2.0"))
    """)
    facts, errors, out = notebook(pkg, "import reloadable", change)
    assert errors == [None, None], out
    assert facts["unchanged"] == [True, True], out
    assert "ppy: reloadable: 2 regions (scale, Net.forward) already built in this session" in out, out
    assert facts["changed"] == [True, True], out
    assert facts["calls"] == 1


def test_a_file_without_the_decorator_is_untouched(pkg):
    cell = "import plain, json\nfacts['loader'] = type(plain.__loader__).__name__\nfacts['hit'] = plain.opt(2)"
    facts, errors, out = notebook(pkg, cell)
    assert errors == [None], out
    assert facts == {"loader": "SourceFileLoader", "hit": 2}
    assert "ppy:" not in out, out


def test_a_function_that_cannot_be_a_region_imports_as_python_and_says_why(pkg):
    cell = textwrap.dedent("""\
        import torch, recursive
        f = recursive.countdown
        facts["region"] = getattr(f, "__ppy_region__", False)
        facts["value"] = torch.equal(f(torch.zeros(2), 3), torch.full((2,), 3.0))
        facts["reason"] = f.__ppy_reason__
    """)
    facts, errors, out = notebook(pkg, cell)
    assert errors == [None], out
    assert facts["region"] is False and facts["value"] is True
    assert "cannot call itself" in facts["reason"]
    assert "ppy: recursive: 'countdown' stays Python: at 9:12: a region cannot call itself" in out, out


def test_strict_and_syntax_errors_fail_the_import_like_a_broken_file(pkg):
    check = "import sys\nfacts['left'] = [m for m in ('strictmod', 'syntaxbad', 'recursive') if m in sys.modules]"
    facts, errors, out = notebook(
        pkg,
        "import strictmod",  # strict=True on the function
        "import syntaxbad",
        "%config PpyMagics.strict = True",
        "import recursive",  # strict from the notebook's options
        check,
        "%config PpyMagics.strict = False",
        "import recursive",
    )
    assert errors[0][0] == "CompileError" and "'strictmod.countdown' stays Python: at 9:12" in errors[0][1], errors
    assert errors[1][0] == "SyntaxError" and "syntaxbad.py" in out, out
    assert errors[2] is None
    assert errors[3][0] == "CompileError" and "'recursive.countdown' stays Python" in errors[3][1], errors
    assert errors[4:] == [None, None, None], out
    assert facts["left"] == []  # a failed import leaves nothing behind


def test_unload_takes_the_hook_off(pkg):
    facts, errors, out = notebook(
        pkg,
        "%unload_ext ppy_magic",
        "import mymodel\nfacts['plain'] = [type(mymodel.__loader__).__name__, hasattr(mymodel.scale, 'calls')]",
    )
    assert errors == [None, None], out
    assert facts["plain"] == ["SourceFileLoader", False]


def test_ppy_run_compiles_what_the_program_imports(pkg):
    proc = subprocess.run(
        [sys.executable, "-m", "ppy_magic.cli", "run", str(pkg / "main.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "regions True True" in proc.stdout, proc.stdout + proc.stderr
    assert "equal True True 1" in proc.stdout
    assert "ppy: mymodel: 2 regions (scale, Net.forward)" in proc.stderr


# ---- the finder's tests, without a kernel ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text,wanted",
    [
        ("import ppy\n\n@ppy.opt(3)\ndef f(x):\n    return x\n", True),
        ("import torch, ppy\n\n@ppy.opt\ndef f(x):\n    return x\n", True),
        ("from ppy import opt\n\nclass A:\n    @opt(2)\n    def f(self, x):\n        return x\n", True),
        ("import ppy_magic\n\n@ppy_magic.opt\ndef f(x):\n    return x\n", False),
        ("# import ppy\n# @ppy.opt\ndef f(x):\n    return x\n", False),
        ("import ppy\n\ndef f(x):\n    return x\n", False),
    ],
)
def test_the_text_test_wants_an_import_of_ppy_and_a_decorator(text, wanted):
    assert imports.mentions_opt(text.encode()) is wanted


def test_library_files_are_not_the_users(tmp_path):
    import torch

    assert not imports.is_users_file(os.__file__)  # the standard library
    assert not imports.is_users_file(torch.nn.functional.__file__)
    assert not imports.is_users_file(imports.__file__)  # this package
    assert not imports.is_users_file(str(tmp_path / "venv" / "lib" / "site-packages" / "m.py"))
    assert not imports.is_users_file(str(tmp_path / "dist-packages" / "m.py"))
    assert imports.is_users_file(str(tmp_path / "mymodel.py"))
