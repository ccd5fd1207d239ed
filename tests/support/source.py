"""Values written as Python source: the parameters and the text of a generated ``@ppy.opt`` function."""

from __future__ import annotations

import math
from typing import Any

import torch

# What every generated cell starts with.
HEADER = "import math\nimport torch\nimport torch.nn.functional as F\nimport ppy\n\n"


class Inexpressible(Exception):
    """A value that cannot be written as a literal or passed as a parameter of a generated function."""


class Params:
    """The parameters a generated function takes: each tensor (or list of tensors) becomes one."""

    def __init__(self) -> None:
        self.decls: list[str] = []
        self.values: list[Any] = []

    def add(self, value: Any, annotation: str = "") -> str:
        name = f"x{len(self.decls)}"
        self.decls.append(f"{name}: {annotation}" if annotation else name)
        self.values.append(value)
        return name

    def literal(self, v: Any, *, in_index: bool = False) -> str:
        """`v` as a Python expression; tensors become parameters."""
        if isinstance(v, torch.Tensor):
            return self.add(v)
        if (
            isinstance(v, (list, tuple))
            and not isinstance(v, torch.Size)
            and v
            and not in_index
            and all(isinstance(x, torch.Tensor) for x in v)
        ):
            return self.add(list(v), "list")  # a TensorList argument: one list parameter
        if v is None or isinstance(v, (bool, str)):
            return repr(v)
        if isinstance(v, int):
            return repr(int(v))
        if isinstance(v, float):
            if math.isnan(v):
                return "math.nan"
            if math.isinf(v):
                return "math.inf" if v > 0 else "-math.inf"
            return repr(v)
        if isinstance(v, complex):
            return f"complex({self.literal(v.real)}, {self.literal(v.imag)})"
        if isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
            return str(v)  # torch.float64, torch.contiguous_format, torch.strided
        if isinstance(v, torch.device):
            return repr(str(v))
        if v is Ellipsis and in_index:
            return "..."
        if isinstance(v, slice) and in_index:
            parts = ["" if p is None else self.literal(p) for p in (v.start, v.stop, v.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
        if isinstance(v, (tuple, list)):  # torch.Size included: eager treats it as a tuple of ints
            items = [self.literal(x, in_index=in_index) for x in v]
            if isinstance(v, list):
                return "[" + ", ".join(items) + "]"
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        raise Inexpressible(f"a {type(v).__module__}.{type(v).__qualname__} argument cannot be written in source")

    def index(self, v: Any) -> str:
        """`v` as what goes between the brackets of ``x[...]``."""
        if isinstance(v, tuple) and not isinstance(v, torch.Size):
            if not v:
                return "()"
            return ", ".join(self.literal(x, in_index=True) for x in v) + ("," if len(v) == 1 else "")
        return self.literal(v, in_index=True)


def function_source(name: str, params: Params, body: str | list[str], level: int = 3) -> str:
    lines = [body] if isinstance(body, str) else body
    return f"@ppy.opt({level})\ndef {name}({', '.join(params.decls)}):\n" + "".join(f"    {ln}\n" for ln in lines)
