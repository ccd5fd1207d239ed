"""The region IR: what the front end understood of one function.

Structured code (blocks, ``if``, ``for``) over a few value kinds (``Kind``).
Expressions are already flattened into evaluation order: every operand is an
atom (a ``Var`` or a ``Const``), so the C++ makes the same ATen calls in the same
order as eager. Every statement carries the Python line it came from.

The IR says *what* a region computes, never how it is written in C++: a ``Call``
of an ATen overload, an ``Intrinsic`` named in ``INTRINSICS``, constants of a
kind. ``backend/cpp.py`` spells each of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .schemas import Overload


class Kind(str, Enum):
    """The kind of a value. The letters of the runtime's kinds are its parameter codes."""

    TENSOR = "T"
    FLOAT = "f"
    INT = "i"
    BOOL = "b"
    NONE = "N"
    STR = "s"
    DTYPE = "d"
    INTS = "I"  # a sequence of ints known at run time (sizes)
    SIZE = "Z"  # a parameter holding exactly a torch.Size (its variable is INTS, a Size in Python: Var.size)
    TENSORS = "L"  # a list of tensors
    OPT_TENSOR = "O"  # a tensor or None
    DEVICE = "D"  # a torch.device (read from a tensor, or a parameter)
    ENUM = "o"  # a torch enum constant with no arithmetic: a memory format or a layout
    OPT_INT = "J"  # an int or None
    OPT_FLOAT = "G"  # a float or None
    OPT_BOOL = "C"  # a bool or None
    OPT_DTYPE = "E"  # a torch.dtype or None
    INT_OR_FLOAT = "F"  # a parameter holding an int or a float (the body is compiled for each; Param.parts)
    DEVICE_OR_STR = "V"  # a parameter holding a device string or a torch.device (likewise)
    MODULE = "M"  # an nn.Module (or plain object) whose attributes the runtime read at the call
    MODULES = "m"  # the modules of a ModuleList or Sequential of one class, read at the call
    NUMBER = "n"  # a Python int, float or bool whose type a tensor's dtype decides at run time (t.item())
    TENSOR_LIST = "l"  # a Python list of tensors: mutable, shared by every name bound to it
    INT_LIST = "j"  # a Python list of ints
    FLOAT_LIST = "g"  # a Python list of floats
    CONSTANT = "K"  # a parameter specialised to the value of the call a variant was built for: compared, not passed
    NUMBERS = "q"  # what x.tolist() gives: its items as Python numbers (for `for` and len() only, never a parameter)
    GRAD_MODE = "w"  # the grad mode a `with torch.no_grad():` block set, restored when it is left (never a value)
    AUTOCAST = "a"  # the autocast state a `with torch.autocast(...)` block set, restored likewise (never a value)

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


SCALAR_KINDS = (Kind.FLOAT, Kind.INT, Kind.BOOL)
KIND_NAMES = {
    Kind.TENSOR: "Tensor",
    Kind.FLOAT: "float",
    Kind.INT: "int",
    Kind.BOOL: "bool",
    Kind.NONE: "None",
    Kind.STR: "str",
    Kind.DTYPE: "torch.dtype",
    Kind.INTS: "a sequence of ints",
    Kind.SIZE: "torch.Size",
    Kind.TENSORS: "a list of tensors",
    Kind.OPT_TENSOR: "Tensor | None",
    Kind.DEVICE: "torch.device",
    Kind.ENUM: "constant",
    Kind.OPT_INT: "int | None",
    Kind.OPT_FLOAT: "float | None",
    Kind.OPT_BOOL: "bool | None",
    Kind.OPT_DTYPE: "torch.dtype | None",
    Kind.INT_OR_FLOAT: "float",  # an int is a float in typing: Python keeps it an int, and so does the region
    Kind.DEVICE_OR_STR: "torch.device",  # or a device string, kept a str
    Kind.MODULE: "a module",
    Kind.MODULES: "a list of modules",
    Kind.NUMBER: "a number (t.item())",
    Kind.TENSOR_LIST: "a list of tensors",
    Kind.INT_LIST: "a list of ints",
    Kind.FLOAT_LIST: "a list of floats",
    Kind.CONSTANT: "a value the variant was specialised for",
    Kind.NUMBERS: "a list of numbers (x.tolist())",
    Kind.GRAD_MODE: "a grad mode",
    Kind.AUTOCAST: "an autocast state",
}
# Parameters that hold one of two kinds, told apart at run time: the kinds (the first when the
# runtime's selector is set). Their functions are compiled once per combination (function.translate).
VARIANTS = {Kind.INT_OR_FLOAT: (Kind.INT, Kind.FLOAT), Kind.DEVICE_OR_STR: (Kind.STR, Kind.DEVICE)}
# The kinds of "X or None" and what they hold when not None.
OPTIONAL_OF = {
    Kind.TENSOR: Kind.OPT_TENSOR,
    Kind.INT: Kind.OPT_INT,
    Kind.FLOAT: Kind.OPT_FLOAT,
    Kind.BOOL: Kind.OPT_BOOL,
    Kind.DTYPE: Kind.OPT_DTYPE,
}
HELD_BY = {opt: kind for kind, opt in OPTIONAL_OF.items()}
# The run-time lists and what they hold; sequences of any kind (lists, and tuples of a length
# known only at run time) and their items.
LIST_OF = {Kind.TENSOR: Kind.TENSOR_LIST, Kind.INT: Kind.INT_LIST, Kind.FLOAT: Kind.FLOAT_LIST}
LIST_KINDS = tuple(LIST_OF.values())
ITEM_KIND = {
    Kind.TENSOR_LIST: Kind.TENSOR,
    Kind.INT_LIST: Kind.INT,
    Kind.FLOAT_LIST: Kind.FLOAT,
    Kind.TENSORS: Kind.TENSOR,
    Kind.INTS: Kind.INT,
}
SEQUENCE_KINDS = tuple(ITEM_KIND)
# The runtime's return-spec letter of each kind a region can return ("(...)" nests a tuple, "[...]" a list of
# a length known at compile time, "R<k>(...)" is a named tuple).
RETURN_CODES = {
    Kind.TENSOR: "T",
    Kind.FLOAT: "f",
    Kind.INT: "i",
    Kind.BOOL: "b",
    Kind.NONE: "N",
    Kind.TENSORS: "V",
    Kind.INTS: "S",
    Kind.NUMBER: "n",
    Kind.OPT_TENSOR: "O",
    Kind.TENSOR_LIST: "l",
    Kind.INT_LIST: "j",
    Kind.FLOAT_LIST: "g",
}
PLAIN_INTS_RETURN = "Y"  # Kind.INTS that is a plain tuple in Python (tuple(x.shape)); "S" is a torch.Size
HELPER_RETURN = "helper"  # the spec of a helper's return: the runtime atoms, as a tuple

# The intrinsics: operations of the region language that are not ATen ops. The IR names
# them; the backend has one spelling of each (backend/cpp.py), and a name it does not know
# fails the code generation. Operands are atoms, in the order given here.
INTRINSICS: dict[str, str] = {
    # tensors
    "tensor_sizes": "x.shape / x.size(): the sizes of a tensor (ints)",
    "tensor_size": "x.size(d): one size of a tensor, d checked and wrapped as PyTorch does",
    "tensor_dim": "x.dim() / x.ndim",
    "tensor_numel": "x.numel()",
    "tensor_dtype": "x.dtype",
    "tensor_device": "x.device",
    "tensor_requires_grad": "x.requires_grad",
    "tensor_is_cuda": "x.is_cuda",
    "tensor_len": "len(x): the size of dimension 0; TypeError on a 0-dim tensor",
    "tensor_to_float": "float(x): Tensor.__float__ (ValueError unless x has one element)",
    "tensor_to_int": "int(x): Tensor.__int__ (a floating tensor's value truncated as int(float) does)",
    "check_iterable": "raise TypeError as Tensor.__iter__ does for a 0-d tensor",
    "is_none": "x is None, for a Tensor-or-None",
    "is_not_none": "x is not None, for a Tensor-or-None",
    "unwrap_optional": "the tensor in a Tensor-or-None known to hold one",
    # sequences (of ints, or of tensors)
    "seq_len": "len(s)",
    "seq_item": "s[i], 0 <= i < len(s) known to hold",
    "seq_item_signed": "s[i] with i in [-n, n) known to hold (operands: s, i, n = len(s))",
    "seq_index": "s[i] of a sequence of ints, as Python indexes (IndexError)",
    "seq_slice": "s[start:stop:step] of a sequence of ints; each bound an int or None",
    "seq_concat": "a + b of two sequences of ints",
    "ints_make": "(a, b, ...) as a sequence of ints known at run time (any number of operands)",
    "seq_get": "s[i] of a list or a run-time tuple, as Python indexes (IndexError)",
    "seq_repeat": "s * n of a sequence of ints, a new one (empty for n <= 0)",
    "range_len": "len(range(start, stop, step)), step != 0",
    "range_item": "range(start, stop, step)[k] for 0 <= k < len (operands: start, step, k)",
    "check_unpack": "raise ValueError as Python does unless a sequence of length n unpacks into want names "
    "(operands: n, want, starred)",
    "index_out_of_range": "not -n <= i < n (operands: i, n)",
    "nonempty": "the truth of a sequence or a str",
    # lists (Python's list semantics: shared by every name bound to one, IndexError as Python raises it)
    "list_new": "[]: a new empty list of the declared kind",
    "list_of": "[a, b, ...]: a new list of these items, all of one kind (one or more operands)",
    "list_from": "list(s): a new list with the items of a list or of a run-time tuple",
    "list_concat": "a + b of two lists: a new list",
    "list_repeat": "a * n of a list: a new list",
    "tuple_from": "tuple(s) of a list: a run-time tuple of its items",
    "list_append": "l.append(v)",
    "list_extend": "l.extend(s) (also l += s), s a list or a run-time tuple of the same items",
    "list_insert": "l.insert(i, v)",
    "list_pop": "l.pop(i): the item, removed (IndexError)",
    "list_set": "l[i] = v (IndexError)",
    "list_clear": "l.clear()",
    "list_reverse": "l.reverse()",
    "list_repeat_inplace": "l *= n",
    # numbers whose type is decided at run time (t.item()); operands of the binary ones are numbers,
    # ints, floats or bools, with Python's semantics
    "to_number": "an int, a float or a bool as a number",
    "number_truth": "bool(a)",
    "number_to_float": "float(a)",
    "number_to_int": "int(a)",
    "number_index": "a as range() takes it: an int or a bool, else TypeError",
    "number_neg": "-a",
    "number_abs": "abs(a)",
    "number_add": "a + b",
    "number_sub": "a - b",
    "number_mul": "a * b",
    "number_truediv": "a / b",
    "number_floordiv": "a // b",
    "number_mod": "a % b",
    "number_eq": "a == b",
    "number_ne": "a != b",
    "number_lt": "a < b",
    "number_le": "a <= b",
    "number_gt": "a > b",
    "number_ge": "a >= b",
    # ints (Python semantics: OverflowError where an int64 would wrap, Python's rounding)
    "int_add": "a + b",
    "int_sub": "a - b",
    "int_mul": "a * b",
    "int_floordiv": "a // b",
    "int_mod": "a % b",
    "int_lshift": "a << b",
    "int_rshift": "a >> b",
    "int_pow": "a ** b, b >= 0",
    "int_truediv": "a / b of ints: a float",
    "int_neg": "-a",
    "int_abs": "abs(a)",
    "int_truth": "a != 0",
    "bit_and": "a & b of ints or of bools",
    "bit_or": "a | b of ints or of bools",
    "bit_xor": "a ^ b of ints or of bools",
    "to_int": "int(a) of a bool",
    "to_float": "float(a) of an int or a bool",
    # floats
    "float_add": "a + b",
    "float_sub": "a - b",
    "float_mul": "a * b",
    "float_truediv": "a / b (ZeroDivisionError)",
    "float_floordiv": "a // b",
    "float_mod": "a % b",
    "float_pow": "a ** b",
    "float_neg": "-a",
    "float_truth": "a != 0.0",
    "float_to_int": "int(a) of a float: truncated, checked",
    # bools and comparisons
    "not": "not a, of a bool",
    "and": "a and b, of two bools both already evaluated",
    "eq": "a == b, operands of one kind (or int and bool; or two sequences of ints)",
    "ne": "a != b, as eq",
    "lt": "a < b, numbers of one kind",
    "le": "a <= b",
    "gt": "a > b",
    "ge": "a >= b",
    "exact_eq": "a == b, numbers of different kinds compared exactly as Python does",
    "exact_ne": "a != b, as exact_eq",
    "exact_lt": "a < b, as exact_eq",
    "exact_le": "a <= b, as exact_eq",
    "exact_gt": "a > b, as exact_eq",
    "exact_ge": "a >= b, as exact_eq",
    "seq_contains": "x in s, for a sequence of ints",
    "same_tensor": "a is b of two tensors (or Tensor-or-None values)",
    "device_type": "device.type: 'cpu', 'cuda', ...",
    "device_index": "device.index: an int, or None",
    "dtype_is_floating_point": "dtype.is_floating_point",
    "dtype_is_complex": "dtype.is_complex",
    "dtype_is_signed": "dtype.is_signed",
    "dtype_itemsize": "dtype.itemsize",
    "str_eq": "a == b of two str",
    "str_ne": "a != b of two str",
    "min": "min(a, b) of two numbers of one kind: the first of equal values",
    "max": "max(a, b), as min",
    # math.* on floats, with CPython's error checks
    "math.sqrt": "math.sqrt(a)",
    "math.exp": "math.exp(a)",
    "math.log": "math.log(a)",
    "math.log2": "math.log2(a)",
    "math.log10": "math.log10(a)",
    "math.sin": "math.sin(a)",
    "math.cos": "math.cos(a)",
    "math.tan": "math.tan(a)",
    "math.tanh": "math.tanh(a)",
    "math.atan": "math.atan(a)",
    "math.erf": "math.erf(a)",
    "math.fabs": "math.fabs(a), and abs() of a float",
    "math.floor": "math.floor(a): an int",
    "math.ceil": "math.ceil(a): an int",
    # strings
    "str_concat": "str(a) + str(b) + ..., each formatted as Python's str() (any number of operands: ints, floats, "
    "bools, str, sizes as torch.Size, dtypes, devices)",
    # warnings (issued when the region returns)
    "warn": "warnings.warn(message): a UserWarning",
    "warn_deprecated": "warnings.warn(message, DeprecationWarning)",
    # checks
    "check_range_step": "raise ValueError as range() does for a zero step",
    # attributes of a module (or object), read by the runtime at the call: operands (module, slot)
    "attr_tensor": "a tensor attribute",
    "attr_opt_tensor": "a tensor-or-None attribute",
    "attr_float": "a float attribute (of a float-or-None one: the float, once tested not None)",
    "attr_int": "an int attribute (likewise)",
    "attr_bool": "a bool attribute (likewise)",
    "attr_str": "a str attribute (likewise)",
    "attr_ints": "a tuple-of-ints attribute (likewise)",
    "attr_is_none": "whether an X-or-None attribute is None",
    "attr_module": "a submodule (of a union: the one it is)",
    "attr_modules": "the modules of a ModuleList or Sequential of one class",
    "attr_variant": "which of a union's options a submodule is (its index)",
    "modules_len": "len() of a list of modules",
    "modules_item": "modules[i], as ModuleList and Sequential index (IndexError); operands (modules, i)",
    "modules_at": "modules[i], 0 <= i < len known to hold",
    "check_nonempty": "raise ValueError(message) as min()/max() do when their iterable is empty (operands: n, message)",
    # tensors made from Python numbers, and numbers read from tensors (ppy_native.h)
    "tensor_new": "torch.tensor(numbers): operands dtype (None: inferred), device (None, a device or a str), "
    "requires_grad, the number of dimensions d, d sizes, then the numbers in row-major order",
    "tensor_new_seq": "torch.tensor(s) of a run-time sequence of numbers: operands dtype, device, requires_grad, s",
    "tensor_copy": "torch.tensor(t) of a tensor (eager's warning; a detached copy): operands t, dtype, device, "
    "requires_grad",
    "legacy_tensor": "torch.FloatTensor([...]) and the like: operands dtype (None: the default dtype), d, d sizes, "
    "then the numbers",
    "tensor_type_name": "x.type(): 'torch.FloatTensor', ...",
    "tensor_tolist": "x.tolist(): a 1-d tensor's items as numbers (a list of numbers; of more dimensions, len() only)",
    "numbers_len": "len() of a list of numbers from x.tolist()",
    "range_list": "the ints of range(start, stop, step) as a list of ints (x[range(...)])",
    # grad mode
    "grad_mode_enter": "enter a block with grad mode set to the operand: a guard restoring the previous mode when "
    "the block is left by any path",
    "grad_mode_exit": "the block's normal end: restore the mode its guard saved",
    "set_grad_enabled": "torch.set_grad_enabled(b) called for its effect: the mode from now on",
    # autocast
    "autocast_enter": "enter a CPU autocast block as autocast.__init__ and __enter__ do: operands the device name, "
    "dtype (None: the current one), enabled as passed, its type name when not a bool, cache_enabled as passed "
    "(None: the current setting), its type name when not a bool or None; a guard that runs __exit__ when the "
    "block is left by any path",
    "autocast_exit": "the block's normal end: autocast.__exit__ with the state its guard saved",
}


@dataclass(frozen=True)
class Var:
    name: str  # unique within the function (the namer's choice)
    kind: Kind
    temp: bool = False  # a temporary of the flattening, never seen by Python code
    # INTS only: the value is a torch.Size in Python (a tensor's sizes), not a tuple or a list: what
    # str() of it and returning it give. Not part of the variable's identity.
    size: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Const:
    value: Any  # int, float, bool, None, str, torch.dtype, torch.memory_format, torch.layout
    kind: Kind


Atom = Var | Const


@dataclass(frozen=True)
class Tup:
    """A tuple (or list) known at compile time: its length and each item's kind are static."""

    items: tuple[Any, ...]
    structseq: Any = None  # a torch.return_types type for eager's named tuples
    # a Python list (returned as one, and str() of it says so); never changed, or it would be a run-time list
    is_list: bool = False
    origin: Any = field(default=None, compare=False)  # the front end's key of the list display that made it


@dataclass(frozen=True)
class WrapNumber:
    """A Python number passed where ATen wants a Tensor: a 0-dim wrapped number, as eager makes."""

    value: Atom


@dataclass(frozen=True)
class Default:
    """An argument left to the schema's default."""

    value: Any


@dataclass(frozen=True)
class Items:
    """A list argument spelled out element by element: ints for int[], floats for float[], tensors for Tensor[]."""

    items: tuple[Atom, ...]
    kind: Kind  # INT, FLOAT or TENSOR


@dataclass(frozen=True)
class IndexItem:
    """One element of ``x[...]``: 'int', 'slice', 'none', 'ellipsis', 'tensor', 'bool', 'list' (of ints
    known at compile time) or 'ints' (a run-time list of ints)."""

    what: str
    atoms: tuple[Atom | None, ...] = ()


Arg = Var | Const | WrapNumber | Default | Items


@dataclass(frozen=True)
class Call:
    """An ATen call of one overload, with one argument per schema argument."""

    op: Overload
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Intrinsic:
    """An operation of the language that is not an ATen op: one of ``INTRINSICS``, on atoms."""

    name: str
    args: tuple[Atom, ...]


@dataclass(frozen=True)
class GetItem:
    tensor: Atom
    index: tuple[IndexItem, ...]


@dataclass(frozen=True)
class CallFunction:
    """A call of another compiled function (an inlined @ppy.opt function or an adapter)."""

    symbol: str
    args: tuple[Atom, ...]


Expr = Call | Intrinsic | GetItem | CallFunction


@dataclass(frozen=True)
class Assign:
    """Declare `targets` and set them from `value` (several targets: a tuple result)."""

    targets: tuple[Var, ...]
    value: Expr
    line: int


@dataclass(frozen=True)
class Declare:
    var: Var
    line: int


@dataclass(frozen=True)
class Move:
    """Set an already declared variable (a merge point of `if` or a loop-carried value)."""

    target: Var
    value: Atom
    line: int


@dataclass(frozen=True)
class Effect:
    """Evaluate for its effect only (in-place ops, item assignment)."""

    value: Expr
    line: int


@dataclass(frozen=True)
class SetItem:
    tensor: Atom
    index: tuple[IndexItem, ...]
    value: Atom
    line: int


@dataclass(frozen=True)
class If:
    cond: Atom
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    line: int


@dataclass(frozen=True)
class For:
    var: Var
    start: Atom
    stop: Atom
    step: Atom
    body: tuple[Stmt, ...]
    line: int


@dataclass(frozen=True)
class ForEach:
    """Iterate over sequences in step, as Python's iterators (and zip) do: the k-th items of every
    sequence, while k is below the length of each; a list's length is read again before each step,
    so items appended meanwhile are visited. `index` is k (or None). A sequence with a start in
    `starts` is walked backwards from it, as ``reversed()`` walks a list: item start - k, while
    that is still inside the list."""

    items: tuple[Var, ...]
    seqs: tuple[Atom, ...]
    index: Var | None
    body: tuple[Stmt, ...]
    line: int
    starts: tuple[Atom | None, ...] = ()  # one per sequence, or () if every one is walked forwards


@dataclass(frozen=True)
class Loop:
    """Repeat `body` until a Break (or a Return or Raise) leaves it: a `while` loop with its test inside."""

    body: tuple[Stmt, ...]
    line: int


@dataclass(frozen=True)
class Break:
    line: int


@dataclass(frozen=True)
class Continue:
    line: int


@dataclass(frozen=True)
class Raise:
    error: str  # AssertionError, ValueError, ... (values.RAISABLE_ERRORS), or another class as module:qualname
    message: Any  # a str, or a STR atom formatted at run time (an f-string)
    line: int


@dataclass(frozen=True)
class Return:
    values: tuple[Atom, ...]  # flattened; the spec says how they nest
    spec: str  # the runtime's return spec, e.g. "T" or "(TT)" (RETURN_CODES), or HELPER_RETURN
    line: int


Stmt = Assign | Declare | Move | Effect | SetItem | If | For | ForEach | Loop | Break | Continue | Raise | Return


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    default: Any = None
    has_default: bool = False
    # A VARIANTS parameter's variables: (the selector: BOOL, its value as the first kind, as the second).
    parts: tuple[Var, ...] = ()


@dataclass(frozen=True)
class Helper:
    """A function called from regions (an inlined @ppy.opt callee or an adapter), specialised."""

    symbol: str
    params: tuple[Var, ...]
    body: tuple[Stmt, ...]
    result_kinds: tuple[Kind, ...]
    track_lines: bool  # False for adapters: errors point at the caller's line


@dataclass(frozen=True)
class Function:
    name: str
    qualname: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    level: int
    filename: str
    first_line: int  # line of the first decorator: the function's co_firstlineno
    def_line: int
    ret: str = "T"  # the runtime's return spec
    helpers: tuple[Helper, ...] = ()
    result_types: tuple[Any, ...] = ()  # structseq types named by 'R<k>' in ret
    source_lines: dict[int, str] = field(default_factory=dict, compare=False)
    frozen_globals: dict[str, Any] = field(default_factory=dict, compare=False)
    extras: int = 0  # *args (1) and **kwargs (2) the body never reads: the runtime ignores what they would hold
    constants: tuple = ()  # per parameter, the value a CONSTANT one was compiled for (empty: none is)
    specialised_reads: tuple[tuple[str, int], ...] = ()  # (what, line): values compiled in (0: the parameter)
    owner: str | None = None  # a method: the name of its class
    plan: Any = None  # what the runtime reads of module parameters (module_plan.Plan), or None

    @property
    def kinds(self) -> str:
        """The runtime's parameter codes, one letter per parameter."""
        return "".join(p.kind.value for p in self.params)
