"""The manifest: what an artifact was built for, a sha256 per file, and one record per region.

``ppy_manifest.json`` is written by ``write`` and read by ``load``. A region's
record is the codegen's ``RegionSpec`` (placed at its lines in the program)
plus what only an artifact needs; its JSON form is derived from the fields of
both, with one encoding per field type (``_CODECS``), so a new ``RegionSpec``
field travels in artifacts with no change here unless its type is new. Also
here: the facts about a process that decide whether an artifact's extensions
may be loaded into it, and the check of those facts against this process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import backend
from ..backend import RegionSpec
from ..errors import ShownError
from ..language import ir
from ..language.attr_types import ClassRef
from ..language.module_plan import Layout, Plan, Slot
from ..language.namespace import Key

FORMAT = "ppy_magic.artifact"
FORMAT_VERSION = 1
MANIFEST = "ppy_manifest.json"
EXPORTED = "%ppy_export"  # the origin of an artifact written from a notebook


class ArtifactError(ShownError):
    """An artifact cannot be written, or a region cannot be exported."""


class PpyArtifactWarning(RuntimeWarning):
    """An artifact's regions (or one of them) were not loaded; those functions run as Python."""


# ---- what a binary depends on ---------------------------------------------------------


def process_facts() -> dict[str, Any]:
    """The facts about this process that decide whether a built extension may be loaded into it."""
    return {
        "torch": {
            "version": torch.__version__,
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
        },
        "python": {
            "version": platform.python_version(),
            "implementation": sys.implementation.name,
            "soabi": sysconfig.get_config_var("SOABI"),
        },
        "platform": {"tag": sysconfig.get_platform(), "libc": " ".join(platform.libc_ver()).strip() or None},
    }


def mismatches(built: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """What differs between the process an artifact was built for and this one, one phrase each."""

    def minor(version: str) -> str:
        return ".".join(str(version).split(".")[:2])

    checks = [
        ("torch", built["torch"]["version"], here["torch"]["version"]),
        ("torch C++ ABI (_GLIBCXX_USE_CXX11_ABI)", built["torch"]["cxx11_abi"], here["torch"]["cxx11_abi"]),
        ("CUDA", built["torch"]["cuda"], here["torch"]["cuda"]),
        ("ROCm", built["torch"]["hip"], here["torch"]["hip"]),
        ("Python", minor(built["python"]["version"]), minor(here["python"]["version"])),
        ("Python implementation", built["python"]["implementation"], here["python"]["implementation"]),
        ("Python extension ABI", built["python"]["soabi"], here["python"]["soabi"]),
        ("platform", built["platform"]["tag"], here["platform"]["tag"]),
    ]
    return [f"{what} {_show(b)} (this process: {_show(h)})" for what, b, h in checks if b != h]


def _show(value: Any) -> str:
    return "none" if value is None else str(value)


def compiler_facts() -> dict[str, Any]:
    """The compiler that built the extensions (informational: loading needs none)."""
    name = backend.compiler_name()
    path = shutil.which(name)
    version = None
    if path:
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
            version = out.splitlines()[0].strip() if out.strip() else None
        except (OSError, subprocess.SubprocessError):
            pass
    return {"name": name, "path": path, "version": version, "flags": list(backend.CELL_CFLAGS)}


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_sha256(lines: list[str], first: int, last: int) -> str:
    """The hash of a function's lines (decorators included): what the region was compiled from."""
    return hashlib.sha256("\n".join(lines[first - 1 : last]).encode()).hexdigest()


# ---- globals a region froze at compile time, as JSON ----------------------------------


def encode_global(value: Any) -> dict[str, Any]:
    """A frozen global as JSON that can be compared with the value the program binds at run time."""
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if type(value) is bool:
        return {"bool": value}
    if type(value) is int:
        return {"int": value}
    if type(value) is float:
        return {"float": value.hex()}  # exact, and NaN compares equal to itself as text
    where = importable_name(value)
    if where is not None:
        return {"object": f"{where[0]}:{where[1]}"}
    return {"repr": repr(value)}


def importable_name(value: Any) -> tuple[str, str] | None:
    """(module, attribute) such that ``from module import attribute`` gives `value` back, if any."""
    mod_name, name = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if not isinstance(mod_name, str) or not isinstance(name, str):
        return None
    try:
        mod = importlib.import_module(mod_name)
    except Exception:  # importing arbitrary modules may fail in many ways; then it is not importable
        return None
    return (mod_name, name) if getattr(mod, name, None) is value else None


class FrozenGlobal(str):
    """A frozen global as the manifest records it: it reads as its description (``explain``), and
    keeps its encoding to compare with the value the program binds at run time."""

    encoded: dict[str, Any]

    def __new__(cls, encoded: dict[str, Any]) -> FrozenGlobal:
        self = super().__new__(cls, _describe(encoded))
        self.encoded = encoded
        return self

    @classmethod
    def of(cls, value: Any) -> FrozenGlobal:
        return cls(encode_global(value))

    def matches(self, value: Any) -> bool:
        return encode_global(value) == self.encoded

    def __repr__(self) -> str:
        return str(self)


def _describe(enc: dict[str, Any]) -> str:
    if "module" in enc:
        return f"<module {enc['module']}>"
    if "float" in enc:
        return repr(float.fromhex(enc["float"]))
    for kind in ("bool", "int"):
        if kind in enc:
            return repr(enc[kind])
    return enc.get("object") or enc.get("repr") or "?"


# ---- the records --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtensionFile:
    module: str  # the extension's module name (its PyInit_ symbol)
    file: str  # file name inside the artifact directory
    sha256: str


@dataclass(frozen=True)
class CallModule:
    """A module a run of the program built at a call (``ppy build --run``): found again by its code key."""

    module: str
    file: str
    sha256: str
    code: str  # backend.shipped.code_key of its C++

    @property
    def extension(self) -> ExtensionFile:
        return ExtensionFile(self.module, self.file, self.sha256)


@dataclass(frozen=True)
class RegionRecord:
    """One region: the codegen's spec, placed in the program, and what only an artifact needs.

    The spec's lines are the program's, its frozen globals are ``FrozenGlobal``s,
    and its ``filename`` is empty: where the program lies is known when it is loaded.
    """

    spec: RegionSpec
    signature: str  # what the user sees, from what the region was compiled for
    extension: str  # module name of the extension holding it
    last_line: int
    source_sha256: str
    device_types: tuple[str, ...]
    level: int

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def key(self) -> Key:
        return (self.spec.name, self.spec.first_line)

    def spec_for(self, filename: str) -> RegionSpec:
        """The spec to bind, for the program at `filename`."""
        return dataclasses.replace(self.spec, filename=filename)


def plan_json(plan: Plan) -> dict[str, Any]:
    """A method region's plan as JSON: classes by import, or by their lines in the program."""

    def cls(ref: ClassRef | None) -> Any:
        if ref is None:
            return None
        if ref.cell is not None:
            return {"program": [ref.name, *ref.cell]}
        where = importable_name(ref.obj)
        if where is None:
            raise ArtifactError(
                f"a region reads a {ref.name}, a class an artifact cannot name (define it in the program, "
                "or import it from a module)"
            )
        return {"import": [where[0], where[1]]}

    return {
        "params": list(plan.params),
        "layouts": [
            {
                "class": cls(lay.cls),
                "module": lay.module,
                "inline": lay.inline,
                "keyed": lay.keyed,
                "name": lay.name,
                "slots": [[s.name, s.how, s.kind, s.optional, list(s.subs), s.pos, s.origin] for s in lay.slots],
            }
            for lay in plan.layouts
        ],
    }


def plan_from_json(data: dict[str, Any]) -> Plan:
    def cls(enc: Any) -> ClassRef | None:
        if enc is None:
            return None
        if "program" in enc:
            name, first, last = enc["program"]
            return ClassRef(str(name), None, (int(first), int(last)))
        module, name = enc["import"]
        obj = getattr(importlib.import_module(module), name)
        return ClassRef(obj.__name__, obj)

    def slot(n: Any, h: Any, k: Any, o: Any, subs: Any, pos: Any, origin: Any) -> Slot:
        return Slot(str(n), str(h), str(k), bool(o), tuple(int(i) for i in subs), int(pos), str(origin))

    layouts = tuple(
        Layout(
            cls(lay["class"]),
            bool(lay["module"]),
            bool(lay["inline"]),
            bool(lay["keyed"]),
            str(lay["name"]),
            tuple(slot(*s) for s in lay["slots"]),
        )
        for lay in data["layouts"]
    )
    return Plan(tuple(int(p) for p in data["params"]), layouts)


Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]  # (value -> JSON, JSON -> value)


def _same(x: Any) -> Any:
    return x


# One JSON form per field type of RegionSpec and RegionRecord. A field of a type not listed fails
# at import (below), so it cannot be left out of artifacts by accident.
_CODECS: dict[Any, Codec] = {
    int: (_same, int),
    str: (_same, _same),
    tuple: (list, tuple),  # of plain values (defaults)
    tuple[str, ...]: (list, tuple),
    tuple[int, ...]: (list, tuple),
    # what a variant compiled at a call read as constants, and where
    tuple[tuple[str, int], ...]: (lambda t: [list(x) for x in t], lambda t: tuple((str(a), int(b)) for a, b in t)),
    dict[int, str]: (lambda d: {str(k): v for k, v in d.items()}, lambda d: {int(k): v for k, v in d.items()}),
    # globals frozen at compile time (FrozenGlobal once recorded)
    dict[str, Any]: (
        lambda d: {k: v.encoded for k, v in d.items()},
        lambda d: {k: FrozenGlobal(v) for k, v in dict(d).items()},
    ),
    # what each optimisation level changes in a region (explain)
    dict[int, tuple[str, ...]]: (
        lambda d: {str(k): list(v) for k, v in d.items()},
        lambda d: {int(k): tuple(v) for k, v in d.items()},
    ),
    # named tuples, by their name in torch.return_types
    tuple[type, ...]: (
        lambda ts: [t.__name__ for t in ts],
        lambda names: tuple(getattr(torch.return_types, n) for n in names),
    ),
    str | None: (_same, _same),  # a method's class
    # what a method reads of its modules, classes by where they are found
    Plan | None: (
        lambda p: None if p is None else plan_json(p),
        lambda d: None if d is None else plan_from_json(d),
    ),
}
_LOCAL = {"filename"}  # RegionSpec fields that describe this process, not the artifact: never recorded
_ABSENT = {"cpp": "", "level_notes": {}}  # what a manifest that lacks a key means, beside the fields' own defaults


def _recorded_fields(cls: type, skip: set[str]) -> list[tuple[str, Codec, Any]]:
    """(name, codec, default) per field of `cls` that a manifest records."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        codec = _CODECS.get(hints[f.name])
        if codec is None:
            raise TypeError(
                f"{cls.__name__}.{f.name} has the type {hints[f.name]}, which ppy_manifest.json cannot "
                "record yet: add its JSON form to _CODECS in ppy_magic/artifact/manifest.py"
            )
        out.append((f.name, codec, _ABSENT.get(f.name, f.default)))
    return out


_SPEC_FIELDS = _recorded_fields(RegionSpec, _LOCAL)
_RECORD_FIELDS = _recorded_fields(RegionRecord, {"spec"})


def region_to_json(r: RegionRecord) -> dict[str, Any]:
    """A region's JSON object: the spec's fields and the record's own, side by side."""
    out = {name: encode(getattr(r.spec, name)) for name, (encode, _), _ in _SPEC_FIELDS}
    out.update({name: encode(getattr(r, name)) for name, (encode, _), _ in _RECORD_FIELDS})
    return out


def region_from_json(d: dict[str, Any]) -> RegionRecord:
    def read(fields: list[tuple[str, Codec, Any]]) -> dict[str, Any]:
        values = {}
        for name, (_, decode), default in fields:
            if name in d:
                values[name] = decode(d[name])
            elif default is not dataclasses.MISSING:
                values[name] = default  # a manifest written before the field existed
            else:
                raise KeyError(name)
        return values

    spec = RegionSpec(**read(_SPEC_FIELDS), **{name: "" for name in _LOCAL})
    return RegionRecord(spec=spec, **read(_RECORD_FIELDS))


# ---- the manifest ------------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    program: str  # file name of the program inside the artifact
    loader: str
    origin: str  # where the program came from, for messages
    package_version: str
    built_for: dict[str, Any]  # process_facts() of the building process
    compiler: dict[str, Any]
    runtime: ExtensionFile
    extensions: tuple[ExtensionFile, ...]
    regions: tuple[RegionRecord, ...]
    python_functions: dict[Key, str]  # decorated functions that stayed Python, and why
    at_calls: tuple[CallModule, ...] = ()  # modules the program's run built at its calls (ppy build --run)

    def region(self, key: Key) -> RegionRecord | None:
        return next((r for r in self.regions if r.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "ppy_magic": self.package_version,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "program": self.program,
            "loader": self.loader,
            "origin": self.origin,
            **self.built_for,
            "compiler": self.compiler,
            "runtime": vars(self.runtime),
            "extensions": [vars(e) for e in self.extensions],
            "regions": [region_to_json(r) for r in self.regions],
            "python_functions": [
                {"name": k[0], "first_line": k[1], "reason": v} for k, v in sorted(self.python_functions.items())
            ],
            "built_at_calls": [vars(m) for m in self.at_calls],
        }

    @classmethod
    def from_json(cls, data: Any) -> Manifest:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"it is not a {FORMAT} manifest")
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"it has format version {data.get('format_version')!r}, and this ppy_magic "
                f"({backend.package_version()}) reads version {FORMAT_VERSION}"
            )
        try:
            return cls(
                program=_plain_file(data["program"]),
                loader=_plain_file(data["loader"]),
                origin=str(data.get("origin", "")),
                package_version=str(data["ppy_magic"]),
                built_for={k: dict(data[k]) for k in ("torch", "python", "platform")},
                compiler=dict(data.get("compiler") or {}),
                runtime=_extension_from_json(data["runtime"]),
                extensions=tuple(_extension_from_json(e) for e in data["extensions"]),
                regions=tuple(region_from_json(r) for r in data["regions"]),
                python_functions={
                    (p["name"], int(p["first_line"])): str(p["reason"]) for p in data.get("python_functions", [])
                },
                at_calls=tuple(_call_module_from_json(m) for m in data.get("built_at_calls", [])),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"it is incomplete ({type(exc).__name__}: {exc})") from None


def _call_module_from_json(m: dict[str, Any]) -> CallModule:
    ext = _extension_from_json(m)
    code = str(m["code"])
    if len(code) != 64 or set(code) - set("0123456789abcdef"):
        raise ValueError(f"it gives a module built at a call a code key that is not a sha256 ({code!r})")
    return CallModule(ext.module, ext.file, ext.sha256, code)


def _plain_file(name: Any) -> str:
    """A file name inside the artifact directory: never a path that leaves it."""
    if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", ".."):
        raise ValueError(f"it names a file outside the artifact ({name!r})")
    return name


def _extension_from_json(e: dict[str, Any]) -> ExtensionFile:
    file = _plain_file(e["file"])
    if not file.endswith(backend.EXT_SUFFIX) or file != e["module"] + backend.EXT_SUFFIX:
        raise ValueError(f"it names an extension file that does not match its module ({file!r})")
    return ExtensionFile(str(e["module"]), file, str(e["sha256"]))


# ---- a region's record, from what the codegen made of it ----------------------------------------


def signature_text(spec: RegionSpec) -> str:
    """``name(x: Tensor, s: float = 0.5) -> Tensor``, from what the region was compiled for."""
    names = {**ir.KIND_NAMES, "O": "Tensor | None", "L": "list[Tensor]", "s": "str"}
    first_default = len(spec.param_names) - len(spec.defaults)
    params = []
    for i, (p, k) in enumerate(zip(spec.param_names, spec.kinds, strict=True)):
        if k == ir.Kind.MODULE.value:
            params.append(p)  # the instance
            continue
        text = f"{p}: {names.get(k, k)}"
        if i >= first_default:
            text += f" = {spec.defaults[i - first_default]!r}"
        params.append(text)
    ret = spec.ret
    if ret.startswith("(") and ret.endswith(")"):
        ret_text = "tuple[" + ", ".join(names.get(k, k) for k in ret[1:-1]) + "]"
    else:
        ret_text = names.get(ret, ret)
    return f"{spec.qualname}({', '.join(params)}) -> {ret_text}"


def region_record(
    spec: RegionSpec,
    extension: str,
    lines: list[str],
    first_line: int,
    last_line: int,
    device_types: tuple[str, ...],
    level: int,
) -> RegionRecord:
    """The manifest entry of `spec`, placed at `first_line`..`last_line` of the program `lines`."""
    shift = first_line - spec.first_line
    # The C++ reports the line it was compiled from (the keys); the notes name the program's line.
    notes = {ln: re.sub(r", line \d+:", f", line {ln + shift}:", note, count=1) for ln, note in spec.line_notes.items()}
    placed = dataclasses.replace(
        spec,
        param_names=tuple(spec.param_names),
        # a dtype or device default is recorded as its repr (binding uses the function's own defaults)
        defaults=tuple(d if d is None or type(d) in (int, float, bool, str) else repr(d) for d in spec.defaults),
        line_notes=notes,
        first_line=first_line,
        filename="",
        frozen_globals={k: FrozenGlobal.of(v) for k, v in sorted(spec.frozen_globals.items())},
        result_types=tuple(spec.result_types),
    )
    return RegionRecord(
        spec=placed,
        signature=signature_text(spec),
        extension=extension,
        last_line=last_line,
        source_sha256=source_sha256(lines, first_line, last_line),
        device_types=tuple(device_types),
        level=level,
    )
