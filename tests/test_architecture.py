"""The package's shape: arrows point one way, nothing imports the package's ``__init__``, and the public names.

The import graph is read from the sources with ``ast`` (no import runs): every ``import`` and
``from ... import`` anywhere in a module (at module level, in functions, under ``if``), relative
or absolute. ``from X import n`` is an arrow to ``X.n`` when that is a module of the package, else
to ``X``. Importing a module implicitly runs its parent packages' ``__init__``; those arrows are not
counted (importing a subpackage or a module is fine), but importing a *name* from the top-level
``__init__`` is: the front door is for users, not for the package itself. No C++ build.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import ppy_magic

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "ppy_magic"

# ---- reading the graph ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arrow:
    source: str  # the importing module
    target: str  # the imported module (or package, for its __init__)
    line: int
    name: str | None = None  # the name taken from the target, when it is not a module itself


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its own name, for its __init__)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def arrows(root: Path, package: str) -> list[Arrow]:
    """Every import, anywhere in every module of `package`, of another module of it."""
    known = modules(root, package)
    out = []
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                out += [Arrow(name, a.name, node.lineno) for a in node.names if a.name in known]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(name, is_package, node.module, node.level)
                if base is None or (base not in known and not base.startswith(package + ".")):
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in known:
                        out.append(Arrow(name, sub, node.lineno))
                    elif base in known:
                        out.append(Arrow(name, base, node.lineno, None if alias.name == "*" else alias.name))
    return out


def _absolute(module: str, is_package: bool, target: str | None, level: int) -> str | None:
    """The absolute name `from <level dots><target> import ...` refers to inside `module`."""
    if level == 0:
        return target
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 >= len(parts):
        return None  # beyond the top-level package
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


def cycles(edges: list[Arrow]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (or a module importing itself)."""
    graph: dict[str, set[str]] = {}
    for a in edges:
        graph.setdefault(a.source, set()).add(a.target)
        graph.setdefault(a.target, set())
    found = []
    for component in _components(graph):
        start = min(component)
        if len(component) > 1 or start in graph[start]:
            found.append(_circle_through(start, component, graph))
    return sorted(found)


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                result.append(component)
    return result


def _circle_through(start: str, component: set[str], graph: dict[str, set[str]]) -> list[str]:
    """The shortest path from `start` back to itself inside `component`: a circle to name."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child == start:
                    return paths[node] + [start]
                if child in component and child not in paths:
                    paths[child] = paths[node] + [child]
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"{start} is in a component but on no circle")  # unreachable for a real component


def imports_of_the_init(edges: list[Arrow], package: str) -> list[Arrow]:
    """Imports of the top-level package itself, or of a name its __init__ defines."""
    return [a for a in edges if a.target == package and a.source != package]


def _named(circle: list[str]) -> str:
    return " -> ".join(circle)


# ---- the package ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> list[Arrow]:
    return arrows(ROOT, PACKAGE)


def test_the_graph_is_read(graph):
    # A reader that found nothing would pass everything below.
    assert len(modules(ROOT, PACKAGE)) > 20 and len(graph) > 50
    line = _line_of(ROOT / PACKAGE / "__init__.py", "from .errors import")
    assert ("ppy_magic", "ppy_magic.errors", line) in {(a.source, a.target, a.line) for a in graph}


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.startswith(text))


def test_no_import_cycles(graph):
    found = cycles(graph)
    assert not found, "import circles in the package:\n" + "\n".join(_named(c) for c in found)


def test_nothing_imports_the_package_init(graph):
    bad = imports_of_the_init(graph, PACKAGE)
    assert not bad, "modules that import the package's __init__ (import the module that defines the name):\n" + (
        "\n".join(f"{a.source} line {a.line}: {a.name or PACKAGE}" for a in bad)
    )


MAX_LINES = 600  # a module longer than this answers more than one question: split it along them


def test_no_module_is_over_600_lines():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in modules(ROOT, PACKAGE).values()
    }
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them along what they answer): {over}"
    assert max(sizes.values()) > MAX_LINES // 2  # the sizes were read


def mixin_collisions(cls: type, allowed_base: type) -> dict[str, list[str]]:
    """Names that more than one of `cls`'s mixins define (their own ``__dunder__`` names and overrides of
    `allowed_base`'s methods aside): the class sees only the first, so the others' callers get the wrong one."""
    owners: dict[str, list[str]] = {}
    for base in cls.__mro__[1:]:
        if base is allowed_base or base is object:
            continue
        for name in vars(base):
            if not (name.startswith("__") or hasattr(allowed_base, name)):
                owners.setdefault(name, []).append(base.__name__)
    return {name: bases for name, bases in owners.items() if len(bases) > 1}


def test_no_two_mixins_of_the_function_compiler_define_the_same_name():
    from ppy_magic.language.function import FunctionCompiler

    clashes = mixin_collisions(FunctionCompiler, ast.NodeVisitor)
    assert not clashes, f"methods defined by more than one mixin (rename one): {clashes}"
    assert len(FunctionCompiler.__mro__) > 10  # the mixins were read


def test_the_mixin_check_finds_a_clash():
    class First:
        def narrowed(self, node): ...

    class Second:
        def narrowed(self, value, not_none): ...

    class Both(First, Second, ast.NodeVisitor):
        pass

    assert mixin_collisions(Both, ast.NodeVisitor) == {"narrowed": ["First", "Second"]}


# ---- the reader itself, on a small package written here ------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_reader_resolves_every_kind_of_import(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import thing\n",
            "pkg/a.py": "from . import b\nfrom .sub import c\nimport os\n",
            "pkg/b.py": "def f():\n    from .sub.c import x\n    import pkg.sub.d\n",
            "pkg/sub/__init__.py": "from .d import y\n",
            "pkg/sub/c.py": "from .. import a\nfrom ..sub import y\nfrom pkg import thing\nimport torch\n",
            "pkg/sub/d.py": "if True:\n    from . import c as renamed\n",
        },
    )
    got = {(a.source, a.target, a.name) for a in arrows(tmp_path, "pkg")}
    assert got == {
        ("pkg", "pkg.a", "thing"),
        ("pkg.a", "pkg.b", None),  # `from . import b`: the module, not the __init__
        ("pkg.a", "pkg.sub.c", None),
        ("pkg.b", "pkg.sub.c", "x"),  # in a function
        ("pkg.b", "pkg.sub.d", None),  # absolute
        ("pkg.sub", "pkg.sub.d", "y"),
        ("pkg.sub.c", "pkg.a", None),  # `from .. import a`
        ("pkg.sub.c", "pkg.sub", "y"),  # a name from a subpackage's __init__: an arrow to that __init__
        ("pkg.sub.c", "pkg", "thing"),  # a name from the top-level __init__
        ("pkg.sub.d", "pkg.sub.c", None),  # under an `if`
    }


def test_the_reader_names_circles_and_imports_of_the_init(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "VERSION = 1\n",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "def later():\n    from .c import x\n",
            "pkg/c.py": "from .a import y\nfrom . import VERSION\n",
            "pkg/d.py": "from . import d\nimport pkg\n",
            "pkg/e.py": "from . import a\n",
        },
    )
    edges = arrows(tmp_path, "pkg")
    assert cycles(edges) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"], ["pkg.d", "pkg.d"]]
    assert {(a.source, a.name) for a in imports_of_the_init(edges, "pkg")} == {("pkg.c", "VERSION"), ("pkg.d", None)}


# ---- the public names -------------------------------------------------------------------------------------------


def test_the_docs_document_exactly_the_public_names():
    api = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`ppy_magic\.(\w+)", api))
    assert documented == set(ppy_magic.__all__)
    # Wherever else the README or a page of docs/ names `ppy_magic.<name>`, that name is public (or a subpackage).
    known = modules(ROOT, PACKAGE)
    for path in DOCS:
        elsewhere = set(re.findall(r"`ppy_magic\.(\w+)", path.read_text(encoding="utf-8"))) - set(ppy_magic.__all__)
        assert not {n for n in elsewhere if f"{PACKAGE}.{n}" not in known}, path.name


# ---- the README and docs/ ---------------------------------------------------------------------------------------

README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250  # read in five minutes; the reference lives in docs/
TEST_COMMAND = "python -m pytest -q"


def _without_blocks(text: str) -> str:
    """`text` without its fenced code blocks: a `# comment` there is no heading, a `[x](y)` no link."""
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.M | re.S)


def _prose(text: str) -> str:
    """`text` without code: no fenced block, and each inline code span emptied (`[x](y)` written as code is
    no link; a link whose text is code stays one)."""
    return re.sub(r"`[^`\n]*`", "``", _without_blocks(text))


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation removed, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a markdown text; a repeated heading's get -1, -2, ... as on GitHub."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", _without_blocks(text), flags=re.M):
        base = anchor = github_anchor(heading)
        n = 0
        while anchor in found:
            n += 1
            anchor = f"{base}-{n}"
        found.add(anchor)
    return found


def relative_links(text: str) -> list[str]:
    """The targets of the markdown links in `text` that point inside the repository."""
    targets = re.findall(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)", _prose(text))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_the_readme_is_short_and_opens_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, "move reference text to a page of docs/ and link it"
    first_block = re.search(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
    assert first_block and first_block.start() < text.index("\n## "), "the two commands come before any section"
    commands = first_block.group(2).strip().splitlines()
    assert first_block.group(1) == "bash" and len(commands) == 2, commands
    assert commands[0].startswith("pip install ") and commands[1] == TEST_COMMAND, commands
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text(encoding="utf-8")  # CI runs the same command


def test_the_anchor_rule_is_githubs():
    assert github_anchor("Code you did not write: `ppy_magic.compile(model)`") == (
        "code-you-did-not-write-ppy_magiccompilemodel"
    )
    assert github_anchor("`@ppy.opt` in an imported file") == "ppyopt-in-an-imported-file"
    assert github_anchor("Built at the cell, or at the call: variants") == "built-at-the-cell-or-at-the-call-variants"
    assert anchors("# A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1"}
    assert relative_links("[x](a.md#b) [![B](https://b/c.svg)](https://d) `[y](z)`\n```\n[q](r)\n```\n") == ["a.md#b"]


@pytest.mark.parametrize("path", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_every_relative_link_in_the_docs_resolves(path):
    """Each link names a file that exists, and an `#anchor` into a markdown file names one of its headings."""
    broken = []
    for target in relative_links(path.read_text(encoding="utf-8")):
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading with that anchor in {linked.relative_to(ROOT)}")
    assert not broken, broken
