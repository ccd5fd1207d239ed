"""How the IR is spelled in C++: the one table of C++ types, literals, constants and intrinsics.

The front end says *what* a region computes (``ir.Intrinsic("tensor_sizes", ...)``,
a constant of a kind, a call of an ATen overload); this module says *how* each
expression is written in C++ (atoms, intrinsics, ATen calls with their arguments
converted to the declared parameter types, index lists), and ``codegen``
assembles the statements around them. A new
intrinsic is a line in ``ir.INTRINSICS`` and a line in ``INTRINSICS`` below (a test
checks the two agree); an intrinsic this table does not know fails the code
generation with ``UnknownIntrinsic``. Every C++ type is spelled one way
(``std::optional``, never ``c10::optional``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import torch

from ..language import ir
from ..language.ir import Kind
from ..torchlib.schemas import Overload, header_name

# ---- types -----------------------------------------------------------------------------------

CPP_TYPES = {
    Kind.TENSOR: "at::Tensor",
    Kind.FLOAT: "double",
    Kind.INT: "int64_t",
    Kind.BOOL: "bool",
    Kind.STR: "std::string",
    Kind.DTYPE: "at::ScalarType",
    Kind.INTS: "std::vector<int64_t>",
    Kind.SIZE: "std::vector<int64_t>",  # a parameter's kind only: its variable is INTS
    Kind.TENSORS: "std::vector<at::Tensor>",
    Kind.OPT_TENSOR: "std::optional<at::Tensor>",
    Kind.DEVICE: "at::Device",
    Kind.OPT_INT: "std::optional<int64_t>",
    Kind.OPT_FLOAT: "std::optional<double>",
    Kind.OPT_BOOL: "std::optional<bool>",
    Kind.OPT_DTYPE: "std::optional<at::ScalarType>",
    Kind.MODULE: "const ppy::Arg*",  # the slots the runtime read of one module
    Kind.MODULES: "const ppy::Arg*",  # the slot of a list of modules: .i of them at .m
    Kind.NUMBER: "at::Scalar",
    Kind.TENSOR_LIST: "ppy::List<at::Tensor>",
    Kind.INT_LIST: "ppy::List<int64_t>",
    Kind.FLOAT_LIST: "ppy::List<double>",
    Kind.NUMBERS: "ppy::Numbers",
    Kind.GRAD_MODE: "ppy::GradMode",
    Kind.AUTOCAST: "ppy::Autocast",
}
SCALAR_TYPES = {Kind.FLOAT: "double", Kind.INT: "int64_t", Kind.BOOL: "bool"}
# What a variable declared before it is set (a join of branches, a loop-carried value) starts as.
DECLARED_INIT = {
    Kind.FLOAT: " = 0.0",
    Kind.INT: " = 0",
    Kind.BOOL: " = false",
    Kind.DTYPE: " = at::ScalarType::Undefined",
    Kind.DEVICE: " = at::Device(at::kCPU)",
}
# Parameters of these kinds are passed to helpers by const reference.
BY_REFERENCE = (
    Kind.TENSOR,
    Kind.TENSORS,
    Kind.INTS,
    Kind.STR,
    Kind.OPT_TENSOR,
    Kind.NUMBER,
    Kind.NUMBERS,
    *ir.LIST_KINDS,
)
NULLOPT = "std::nullopt"


def cpp_type(kind: Kind) -> str:
    try:
        return CPP_TYPES[kind]
    except KeyError:
        raise ValueError(f"no C++ type for the kind {kind!r}") from None


# ---- literals and constants ------------------------------------------------------------------

DTYPE_NAMES = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.bool: "Bool",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
    torch.complex32: "ComplexHalf",
    torch.uint16: "UInt16",
    torch.uint32: "UInt32",
    torch.uint64: "UInt64",
    torch.qint8: "QInt8",
    torch.quint8: "QUInt8",
    torch.qint32: "QInt32",
    torch.quint4x2: "QUInt4x2",
    torch.quint2x4: "QUInt2x4",
    torch.float8_e5m2: "Float8_e5m2",
    torch.float8_e4m3fn: "Float8_e4m3fn",
    torch.float8_e5m2fnuz: "Float8_e5m2fnuz",
    torch.float8_e4m3fnuz: "Float8_e4m3fnuz",
    torch.float8_e8m0fnu: "Float8_e8m0fnu",
    torch.float4_e2m1fn_x2: "Float4_e2m1fn_x2",
}

# The torch enum constants a region may name (values.ENUM_CONSTANTS).
ENUM_CONSTANTS = {
    torch.contiguous_format: "at::MemoryFormat::Contiguous",
    torch.channels_last: "at::MemoryFormat::ChannelsLast",
    torch.channels_last_3d: "at::MemoryFormat::ChannelsLast3d",
    torch.preserve_format: "at::MemoryFormat::Preserve",
    torch.strided: "at::kStrided",
}


def cpp_literal(value: object, kind: Kind | str) -> str:
    """A C++ expression for a constant of `kind`, exact (floats as hexadecimal literals)."""
    kind = Kind(kind)
    if kind == Kind.BOOL:
        return "true" if value else "false"
    if kind == Kind.INT:
        v = int(value)  # type: ignore[call-overload]
        return f"INT64_C({v})" if v != -(2**63) else "INT64_MIN"
    if kind == Kind.FLOAT:
        v = float(value)  # type: ignore[arg-type]
        if math.isnan(v):
            return "std::numeric_limits<double>::quiet_NaN()"
        if math.isinf(v):
            return ("-" if v < 0 else "") + "std::numeric_limits<double>::infinity()"
        return v.hex()  # exact: C++17 hexadecimal floating literal
    if kind == Kind.STR:
        return "std::string(" + json.dumps(value) + ")"
    if kind == Kind.DTYPE:
        return f"at::ScalarType::{DTYPE_NAMES[value]}"  # type: ignore[index]
    if kind == Kind.DEVICE:
        return f"c10::Device(std::string({json.dumps(str(value))}))"
    if kind == Kind.ENUM:
        return ENUM_CONSTANTS[value]  # type: ignore[index]
    if kind == Kind.NONE:
        return NULLOPT
    raise ValueError(f"no C++ literal for kind {kind!r}")


def scalar(expr: str, kind: Kind) -> str:
    """An ``at::Scalar`` holding `expr` as a number of `kind` (a float for any other kind)."""
    if kind == Kind.NUMBER:
        return expr  # already an at::Scalar of the type eager would have
    return f"at::Scalar(static_cast<{SCALAR_TYPES.get(kind, 'double')}>({expr}))"


def python_error(name: str) -> str:
    """The runtime's code for a Python exception type (values.RAISABLE_ERRORS)."""
    return f"ppy::PyError::{name}"


# ---- ATen operators ----------------------------------------------------------------------------


def op_call(op: Overload) -> str:
    """The C++ function that calls one ATen overload through the dispatcher."""
    return f"at::_ops::{op.entry}::call"


def op_header(op: Overload) -> str:
    """The header that declares it (in-place ``add_`` lives in ``add_ops.h``)."""
    return f"ATen/ops/{header_name(op.name)}_ops.h"


# ---- intrinsics --------------------------------------------------------------------------------

Template = str | Callable[[list[str]], str]  # "{0}" ... stand for the operands, or a function of them


def _ints_make(args: list[str]) -> str:
    return "std::vector<int64_t>{" + ", ".join(args) + "}"


def _str_concat(args: list[str]) -> str:
    return "(std::string() + " + " + ".join(f"ppy::py_str({a})" for a in args) + ")"


def _numbers(args: list[str], first: int) -> tuple[str, str]:
    """The sizes and the numbers of tensor_new and legacy_tensor, from operand `first` (the count of sizes) on."""
    d = int(args[first].removeprefix("INT64_C(").removesuffix(")"))
    sizes = args[first + 1 : first + 1 + d]
    values = args[first + 1 + d :]
    return "std::vector<int64_t>{" + ", ".join(sizes) + "}", "std::vector<at::Scalar>{" + ", ".join(values) + "}"


def _tensor_new(args: list[str]) -> str:
    sizes, values = _numbers(args, 3)
    return f"ppy::tensor_new({args[0]}, ppy::device_of({args[1]}), {args[2]}, {sizes}, {values})"


def _legacy_tensor(args: list[str]) -> str:
    sizes, values = _numbers(args, 1)
    return f"ppy::legacy_tensor({args[0]}, {sizes}, {values})"


def _checked(fn: str) -> str:
    return f"ppy::math_checked({{0}}, std::{fn}({{0}}))"


INTRINSICS: dict[str, Template] = {
    # tensors
    "tensor_sizes": "{0}.sizes().vec()",
    "tensor_size": "{0}.size({1})",
    "tensor_dim": "static_cast<int64_t>({0}.dim())",
    "tensor_numel": "{0}.numel()",
    "tensor_dtype": "{0}.scalar_type()",
    "tensor_device": "{0}.device()",
    "tensor_requires_grad": "{0}.requires_grad()",
    **{f"tensor_{f}": f"{{0}}.{f}()" for f in ir.TENSOR_FLAGS},
    "tensor_len": "ppy::checked_len_dim0({0})",
    "optional_int": "({0} ? std::optional<int64_t>() : std::optional<int64_t>({1}))",
    "optional_float": "({0} ? std::optional<double>() : std::optional<double>({1}))",
    "optional_bool": "({0} ? std::optional<bool>() : std::optional<bool>({1}))",
    "tensor_to_float": "ppy::tensor_to_float({0})",
    "tensor_to_int": "ppy::tensor_to_int({0})",
    "check_iterable": "ppy::check_iterable({0})",
    "is_none": "(!{0}.has_value())",
    "is_not_none": "{0}.has_value()",
    "unwrap_optional": "(*{0})",
    # sequences
    "seq_len": "static_cast<int64_t>({0}.size())",
    "seq_item": "{0}[{1}]",
    "seq_item_signed": "{0}[{1} < 0 ? {1} + {2} : {1}]",
    "seq_index": "ppy::seq_index({0}, {1})",
    "seq_slice": "ppy::seq_slice({0}, std::optional<int64_t>({1}), std::optional<int64_t>({2}), "
    "std::optional<int64_t>({3}))",
    "seq_concat": "ppy::seq_concat({0}, {1})",
    "ints_make": _ints_make,
    "seq_get": "ppy::seq_index({0}, {1})",
    "seq_repeat": "ppy::seq_repeat({0}, {1})",
    "range_len": "ppy::range_len({0}, {1}, {2})",
    "range_item": "ppy::range_item({0}, {1}, {2})",
    "check_unpack": "ppy::check_unpack({0}, {1}, {2})",
    "index_out_of_range": "({0} < -{1} || {0} >= {1})",
    "nonempty": "(!{0}.empty())",
    # lists
    "list_new": "{}",  # value-initialised: the declared type's default, a new empty list
    "list_of": lambda args: "ppy::list_of(" + ", ".join(args) + ")",
    "list_from": "ppy::list_from({0})",
    "list_concat": "ppy::list_concat({0}, {1})",
    "list_repeat": "ppy::list_repeat({0}, {1})",
    "tuple_from": "ppy::tuple_from({0})",
    "list_append": "ppy::list_append({0}, {1})",
    "list_extend": "ppy::list_extend({0}, {1})",
    "list_insert": "ppy::list_insert({0}, {1}, {2})",
    "list_pop": "ppy::list_pop({0}, {1})",
    "list_set": "ppy::list_set({0}, {1}, {2})",
    "list_clear": "ppy::list_clear({0})",
    "list_reverse": "ppy::list_reverse({0})",
    "list_repeat_inplace": "ppy::list_repeat_inplace({0}, {1})",
    # numbers (at::Scalar; ints, floats and bools convert to it implicitly)
    "to_number": "at::Scalar({0})",
    "number_truth": "ppy::num_truth({0})",
    "number_to_float": "ppy::num_to_float({0})",
    "number_to_int": "ppy::num_to_int({0})",
    "number_index": "ppy::num_index({0})",
    "number_neg": "ppy::num_neg({0})",
    "number_abs": "ppy::num_abs({0})",
    "number_add": "ppy::num_add({0}, {1})",
    "number_sub": "ppy::num_sub({0}, {1})",
    "number_mul": "ppy::num_mul({0}, {1})",
    "number_truediv": "ppy::num_truediv({0}, {1})",
    "number_floordiv": "ppy::num_floordiv({0}, {1})",
    "number_mod": "ppy::num_mod({0}, {1})",
    "number_eq": "ppy::num_eq({0}, {1})",
    "number_ne": "ppy::num_ne({0}, {1})",
    "number_lt": "ppy::num_lt({0}, {1})",
    "number_le": "ppy::num_le({0}, {1})",
    "number_gt": "ppy::num_gt({0}, {1})",
    "number_ge": "ppy::num_ge({0}, {1})",
    # ints
    "int_add": "ppy::py_add({0}, {1})",
    "int_sub": "ppy::py_sub({0}, {1})",
    "int_mul": "ppy::py_mul({0}, {1})",
    "int_floordiv": "ppy::py_floordiv({0}, {1})",
    "int_mod": "ppy::py_mod({0}, {1})",
    "int_lshift": "ppy::py_lshift({0}, {1})",
    "int_rshift": "ppy::py_rshift({0}, {1})",
    "int_pow": "ppy::py_pow({0}, {1})",
    "int_truediv": "ppy::py_int_truediv({0}, {1})",
    "int_neg": "ppy::py_neg({0})",
    "int_abs": "({0} < 0 ? ppy::py_neg({0}) : {0})",
    "int_truth": "({0} != 0)",
    "bit_and": "({0} & {1})",
    "bit_or": "({0} | {1})",
    "bit_xor": "({0} ^ {1})",
    "to_int": "static_cast<int64_t>({0})",
    "to_float": "static_cast<double>({0})",
    # floats
    "float_add": "({0} + {1})",
    "float_sub": "({0} - {1})",
    "float_mul": "({0} * {1})",
    "float_truediv": "ppy::py_truediv({0}, {1})",
    "float_floordiv": "ppy::py_ffloordiv({0}, {1})",
    "float_mod": "ppy::py_fmod({0}, {1})",
    "float_pow": "ppy::py_fpow({0}, {1})",
    "float_neg": "(-{0})",
    "float_truth": "({0} != 0.0)",
    "float_to_int": "ppy::math_trunc({0})",
    # bools and comparisons
    "not": "(!{0})",
    "and": "({0} && {1})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "exact_eq": "(ppy::exact({0}) == ppy::exact({1}))",
    "exact_ne": "(ppy::exact({0}) != ppy::exact({1}))",
    "exact_lt": "(ppy::exact({0}) < ppy::exact({1}))",
    "exact_le": "(ppy::exact({0}) <= ppy::exact({1}))",
    "exact_gt": "(ppy::exact({0}) > ppy::exact({1}))",
    "exact_ge": "(ppy::exact({0}) >= ppy::exact({1}))",
    "seq_contains": "(std::find({0}.begin(), {0}.end(), {1}) != {0}.end())",
    "same_tensor": "ppy::same_tensor({0}, {1})",
    "device_type": "c10::DeviceTypeName({0}.type(), /*lower_case=*/true)",
    "device_index": "({0}.has_index() ? std::optional<int64_t>({0}.index()) : std::optional<int64_t>())",
    "dtype_is_floating_point": "at::isFloatingType({0})",
    "dtype_is_complex": "at::isComplexType({0})",
    "dtype_is_signed": "at::isSignedType({0})",
    "dtype_itemsize": "static_cast<int64_t>(c10::elementSize({0}))",
    "str_eq": "(std::string({0}) == std::string({1}))",
    "str_ne": "(std::string({0}) != std::string({1}))",
    "min": "({1} < {0} ? {1} : {0})",
    "max": "({1} > {0} ? {1} : {0})",
    # math.*
    "math.sqrt": _checked("sqrt"),
    "math.exp": _checked("exp"),
    "math.log": "ppy::math_log({0})",
    "math.log2": "ppy::math_log2({0})",
    "math.log10": "ppy::math_log10({0})",
    "math.sin": _checked("sin"),
    "math.cos": _checked("cos"),
    "math.tan": _checked("tan"),
    "math.tanh": "std::tanh({0})",
    "math.atan": "std::atan({0})",
    "math.erf": "std::erf({0})",
    "math.fabs": "std::fabs({0})",
    "math.floor": "ppy::math_floor({0})",
    "math.ceil": "ppy::math_ceil({0})",
    # strings
    "str_concat": _str_concat,
    # warnings
    "warn": "ppy::warn({0}, false)",
    "warn_deprecated": "ppy::warn({0}, true)",
    # checks
    "check_range_step": "ppy::check_range_step({0})",
    # attributes of modules: ppy::Arg slots the runtime filled before the region ran
    "attr_tensor": "(*{0}[{1}].t)",
    "attr_opt_tensor": "({0}[{1}].none ? std::optional<at::Tensor>() : std::optional<at::Tensor>(*{0}[{1}].t))",
    "attr_float": "{0}[{1}].f",
    "attr_int": "{0}[{1}].i",
    "attr_bool": "({0}[{1}].i != 0)",
    "attr_str": 'std::string({0}[{1}].s ? {0}[{1}].s : "")',
    "attr_ints": "(*{0}[{1}].ints)",
    "attr_is_none": "{0}[{1}].none",
    "attr_module": "{0}[{1}].m",
    "attr_modules": "(&{0}[{1}])",
    "attr_variant": "{0}[{1}].i",
    "modules_len": "{0}->i",
    "modules_item": "ppy::module_item({0}, {1})",
    "modules_at": "{0}->m[{1}].m",
    "check_nonempty": "ppy::check_nonempty({0}, {1}.c_str())",
    # tensors made from Python numbers, numbers read from tensors
    "tensor_new": _tensor_new,
    "tensor_new_seq": "ppy::tensor_new_seq({0}, ppy::device_of({1}), {2}, {3})",
    "tensor_copy": "ppy::tensor_copy({0}, {1}, ppy::device_of({2}), {3})",
    "legacy_tensor": _legacy_tensor,
    "tensor_type_name": "ppy::tensor_type_name({0})",
    "tensor_tolist": "ppy::tensor_tolist({0})",
    "numbers_len": "ppy::numbers_len({0})",
    "range_list": "ppy::range_list({0}, {1}, {2})",
    # the process's settings
    "grad_enabled": "c10::GradMode::is_enabled()",
    "inference_mode_enabled": "c10::InferenceMode::is_enabled()",
    "deterministic_algorithms": "at::globalContext().deterministicAlgorithms()",
    "deterministic_warn_only": "at::globalContext().deterministicAlgorithmsWarnOnly()",
    "cudnn_enabled": "at::globalContext().userEnabledCuDNN()",
    "cudnn_deterministic": "at::globalContext().deterministicCuDNN()",
    "cudnn_benchmark": "at::globalContext().benchmarkCuDNN()",
    # grad mode
    "grad_mode_enter": "ppy::GradMode({0})",
    "grad_mode_exit": "{0}.exit()",
    "set_grad_enabled": "c10::GradMode::set_enabled({0})",
    # autocast (CPU only: the front end refuses other device types)
    "autocast_enter": "ppy::Autocast(at::kCPU, {0}, {1}, {2}, {3}, {4}, {5})",
    "autocast_exit": "{0}.exit()",
}

_PLACEHOLDER = re.compile(r"\{(\d+)\}")


class UnknownIntrinsic(ValueError):
    """The IR names an intrinsic this backend cannot spell: a bug in the front end, never the user's."""


def intrinsic(name: str, operands: list[str]) -> str:
    """The C++ expression of intrinsic `name` applied to the operands' C++ expressions."""
    template = INTRINSICS.get(name)
    if template is None:
        raise UnknownIntrinsic(f"the backend has no C++ for the intrinsic {name!r}")
    if callable(template):
        return template(operands)
    used = {int(i) for i in _PLACEHOLDER.findall(template)}
    if used != set(range(len(operands))):
        raise UnknownIntrinsic(f"the intrinsic {name!r} takes {len(used)} operands, got {len(operands)}")
    return _PLACEHOLDER.sub(lambda m: operands[int(m.group(1))], template)


# ---- expressions: atoms, ATen calls and their arguments, indexing -----------------------------------


class Namer:
    """C++ names for IR variables: never a keyword, never clashing with ours."""

    def __call__(self, var: ir.Var) -> str:
        return f"v_{var.name}"


NAME = Namer()


def atom(a: Any) -> str:
    if isinstance(a, ir.Var):
        return NAME(a)
    if isinstance(a, ir.Const):
        return cpp_literal(a.value, a.kind)
    raise TypeError(f"not an atom: {a!r}")


def _scalar(a: Any) -> str:
    return scalar(atom(a), a.kind)


STRING_VIEWS = ("c10::string_view", "::std::string_view", "std::string_view")


def base_type(decl: str) -> str:
    """The base C++ type of a parameter type (``const std::optional<T>&`` -> ``T``)."""
    t = decl.replace("const ", "").replace("&", "").strip()
    for opt in ("::std::optional<", "std::optional<", "c10::optional<"):  # as torch's headers spell it
        if t.startswith(opt):
            return t[len(opt) : -1].strip()
    if t == "at::OptionalIntArrayRef":
        return "at::IntArrayRef"
    if t == "at::OptionalSymIntArrayRef":
        return "c10::SymIntArrayRef"
    return t


def _ints(expr_items: list[str]) -> str:
    return "at::IntArrayRef{" + ", ".join(expr_items) + "}"


def _convert(base: str, a: Any, write: bool) -> str:
    """C++ for an atom (or Items) passed as a parameter of C++ type `base`."""
    if isinstance(a, ir.Items):
        if a.kind == Kind.INT:
            arr = _ints([f"static_cast<int64_t>({atom(i)})" for i in a.items])
            return f"c10::fromIntArrayRefSlow({arr})" if "SymInt" in base else arr
        if a.kind == Kind.FLOAT:
            return "at::ArrayRef<double>{" + ", ".join(f"static_cast<double>({atom(i)})" for i in a.items) + "}"
        return "at::TensorList{" + ", ".join(atom(i) for i in a.items) + "}"
    if getattr(a, "kind", None) in ir.HELD_BY and a.kind != Kind.OPT_TENSOR:
        return atom(a)  # std::optional<T> converts to the parameter's std::optional<U>
    if base == "at::Tensor":
        return f"const_cast<at::Tensor&>({atom(a)})" if write else atom(a)
    if base == "at::Scalar":
        return _scalar(a)
    if base in ("int64_t", "c10::SymInt"):
        return f"static_cast<int64_t>({atom(a)})"
    if base == "double":
        return f"static_cast<double>({atom(a)})"
    if base in STRING_VIEWS:
        return f"c10::string_view({atom(a)})"
    items = f"{atom(a)}.vec()" if a.kind in ir.LIST_KINDS else atom(a)  # a list's items: a std::vector
    if base in ("at::IntArrayRef",):
        return f"at::IntArrayRef({items})"
    if base == "c10::SymIntArrayRef":
        return f"c10::fromIntArrayRefSlow(at::IntArrayRef({items}))"
    if base in ("at::TensorList", "at::ITensorListRef"):
        return f"at::TensorList({items})"
    if base == "at::Device" and a.kind == Kind.STR:
        return f"at::Device({atom(a)})"
    return atom(a)


def _default(base: str, v: Any) -> str:
    if v is None:
        return NULLOPT
    if base == "at::Scalar":
        kind = Kind.BOOL if type(v) is bool else Kind.INT if type(v) is int else Kind.FLOAT
        return scalar(cpp_literal(v, kind), kind)
    if base in ("int64_t", "c10::SymInt"):
        return cpp_literal(v, Kind.INT)
    if base == "double":
        return cpp_literal(float(v), Kind.FLOAT)
    if base == "bool":
        return cpp_literal(v, Kind.BOOL)
    if base in STRING_VIEWS:
        return f"c10::string_view({json.dumps(v)})"
    if base in ("at::IntArrayRef", "c10::SymIntArrayRef"):
        items = [cpp_literal(i, Kind.INT) for i in (v if isinstance(v, (list, tuple)) else [v])]
        if not items:
            return f"{base}{{}}"
        return f"c10::fromIntArrayRefSlow({_ints(items)})" if "SymInt" in base else _ints(items)
    if base in ("at::MemoryFormat", "at::Layout", "at::ScalarType") and type(v) is int:
        return f"static_cast<{base}>({v})"
    raise ValueError(f"no C++ default for {base} = {v!r}")


def call_args(call: ir.Call) -> list[str]:
    out = []
    for sarg, a in zip(call.op.args, call.args, strict=True):
        base = base_type(sarg.cpp)
        if isinstance(a, ir.Default):
            out.append(_default(base, a.value))
        elif isinstance(a, ir.WrapNumber):
            out.append(f"ppy::wrapped_number({_scalar(a.value)})")
        elif isinstance(a, ir.Const) and a.kind == Kind.NONE:
            out.append(NULLOPT)
        else:
            out.append(_convert(base, a, sarg.is_write))
    return out


def index(items: tuple[ir.IndexItem, ...], tensor: Any) -> str:
    parts = []
    for it in items:
        if it.what == "list":
            values = ", ".join(f"static_cast<int64_t>({atom(a)})" for a in it.atoms)
            values = f"{{{values}}}" if it.atoms else "at::ArrayRef<int64_t>()"  # x[[]]: an empty Long index
            parts.append(f"at::indexing::TensorIndex(ppy::index_list({atom(tensor)}, {values}))")
        elif it.what == "ints":
            parts.append(f"at::indexing::TensorIndex(ppy::index_list({atom(tensor)}, {atom(it.atoms[0])}.vec()))")
        elif it.what == "int":
            parts.append(f"at::indexing::TensorIndex(static_cast<int64_t>({atom(it.atoms[0])}))")
        elif it.what == "bool":
            parts.append(f"at::indexing::TensorIndex(static_cast<bool>({atom(it.atoms[0])}))")
        elif it.what == "tensor":
            parts.append(f"at::indexing::TensorIndex({atom(it.atoms[0])})")
        elif it.what == "none":
            parts.append("at::indexing::TensorIndex(at::indexing::None)")
        elif it.what == "ellipsis":
            parts.append("at::indexing::TensorIndex(at::indexing::Ellipsis)")
        else:
            bounds = [
                "std::optional<c10::SymInt>()"
                if b is None
                else f"std::optional<c10::SymInt>(static_cast<int64_t>({atom(b)}))"
                for b in it.atoms
            ]
            parts.append(f"at::indexing::TensorIndex(at::indexing::Slice({', '.join(bounds)}))")
    return "{" + ", ".join(parts) + "}"


def expr(e: ir.Expr) -> str:
    if isinstance(e, ir.Call):
        return f"{op_call(e.op)}({', '.join(call_args(e))})"
    if isinstance(e, ir.Intrinsic):
        return intrinsic(e.name, [atom(a) for a in e.args])
    if isinstance(e, ir.GetItem):
        return f"at::indexing::get_item({atom(e.tensor)}, {index(e.index, e.tensor)})"
    if isinstance(e, ir.CallFunction):
        return f"{e.symbol}({', '.join(['ppy_frame'] + [atom(a) for a in e.args])})"
    raise TypeError(e)
