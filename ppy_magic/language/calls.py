"""Calls in the region language: ATen ops, builtins, ``math.*``; callees in ``callees.py``.

A mixin of ``function.FunctionCompiler``. Another ``@ppy.opt`` function or an
adapter is compiled, by a new compiler of the same class, as a helper specialised
to the call site's argument kinds (constants stay constants), and called.
"""

from __future__ import annotations

import ast
import collections.abc
import functools
import types
import typing
import warnings
from typing import Any

import torch

from ..torchlib import adapters, ops, torch_source
from . import einops_forms, ir
from .consumers import CONSUMERS
from .ir import Kind
from .iteration import StaticIteration
from .lists import ListMethod
from .namespace import Globals
from .values import (
    MATH_FUNCTIONS,
    PLAIN_FUNCTION,
    PLAIN_FUNCTION_HINT,
    BoundMethod,
    Closure,
    KwArgs,
    ModuleValue,
    OptionalScalar,
    SliceValue,
    Static,
    TensorMethod,
    UnionValue,
    Unsupported,
    constant,
)

_KIND_OF = {float: Kind.FLOAT, int: Kind.INT, bool: Kind.BOOL}


def _consumes(node: ast.Call, fn: Any) -> bool:
    """Whether a call of sum/any/all/min/max/list/tuple iterates its argument (rather than, say, min(a, b)
    of two numbers, which builtin_call keeps to its fast path)."""
    if fn in (min, max) and len(node.args) > 1:
        return False
    return bool(node.args)


# torch.overrides' checks, which torch's Python functions make before their ops (see torch_function_check).
TORCH_FUNCTION_CHECKS = frozenset(
    {
        torch.overrides.has_torch_function,
        torch.overrides.has_torch_function_unary,
        torch.overrides.has_torch_function_variadic,
    }
)


# Asked by torch's functions, False while a region runs: no TorchScript, and no dynamo or export traces its C++.
NEVER_IN_A_REGION = frozenset(
    {
        torch.jit.is_scripting,
        torch.compiler.is_compiling,
        torch.compiler.is_dynamo_compiling,
        torch.compiler.is_exporting,
        torch._utils.is_compiling,
    }
)

# torch._check and its kin raise this error with the message callable's str() when the condition is False.
TORCH_CHECKS = {
    torch._check: "RuntimeError",
    torch._check_index: "IndexError",
    torch._check_value: "ValueError",
    torch._check_type: "TypeError",
    torch._check_not_implemented: "NotImplementedError",
}


@functools.cache
def _check_definition(error: str) -> tuple[ast.FunctionDef, list[str]]:
    """torch._check_with's path for a bool condition and a message callable, in the region language."""
    text = f"def _check_with(cond, message):\n    if not cond:\n        raise {error}(str(message()))\n"
    return ast.parse(text).body[0], text.splitlines()


# The process's settings a call reads (ir.INTRINSICS): torch's functions branch on them (F.pad: deterministic).
SETTINGS = {
    torch.is_grad_enabled: "grad_enabled",
    torch.is_inference_mode_enabled: "inference_mode_enabled",
    torch.are_deterministic_algorithms_enabled: "deterministic_algorithms",
    torch.is_deterministic_algorithms_warn_only_enabled: "deterministic_warn_only",
}
# ... and the torch.backends flags they pass on (F.batch_norm, F.layer_norm: cudnn_enabled), read as attributes;
# a value frozen at compile time would outlive `torch.backends.cudnn.enabled = False`.
SETTING_ATTRIBUTES = {
    (id(torch.backends.cudnn), "enabled"): "cudnn_enabled",
    (id(torch.backends.cudnn), "deterministic"): "cudnn_deterministic",
    (id(torch.backends.cudnn), "benchmark"): "cudnn_benchmark",
}


class CallCompiler:
    # calls
    def visit_Call(self, node: ast.Call) -> Any:
        f = node.func
        literal = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Constant) and isinstance(f.value.value, str)
        if literal and f.attr == "format":
            return self.str_format(node)  # "...".format(...) of a literal (python_forms)
        func = self.value(node.func)
        if isinstance(func, Static) and func.value in CONSUMERS and _consumes(node, func.value):
            return self.consume(node, func.value)  # arguments evaluated as the builtin's loop needs them
        args = self.call_args(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:  # **kwargs of a callee that received them: passed on
                spread = self.value(kw.value)
                if not isinstance(spread, KwArgs):
                    raise self.error(kw.value, "`**` of anything but a function's own **kwargs is not supported")
                for k, v in spread.items:
                    if k in kwargs:
                        raise self.error(kw.value, f"got multiple values for keyword argument '{k}'")
                    kwargs[k] = v
                continue
            if kw.arg in kwargs:
                raise self.error(kw.value, f"got multiple values for keyword argument '{kw.arg}'")
            kwargs[kw.arg] = self.value(kw.value)
        if isinstance(func, TensorMethod):
            return self.method_call(node, func, args, kwargs)
        if isinstance(func, Closure):
            return self.call_closure(node, func, args, kwargs)
        if isinstance(func, ListMethod):
            return self.list_method_call(node, func, args, kwargs)
        if isinstance(func, Static):
            return self.static_call(node, func.value, args, kwargs)
        if isinstance(func, ModuleValue):  # module(x): its forward, where nn.Module.__call__ would run it
            return self.call_module(node, func, args, kwargs)
        if isinstance(func, BoundMethod):  # self.method(x), module.forward(x): no hooks
            return self.call_module(node, func.module, args, kwargs, method=func.name, hooks=False)
        if isinstance(func, UnionValue):
            return self.call_union(node, func, args, kwargs)
        raise self.error(node.func, f"calling {ops.describe(func)} is not supported in a region")

    def call_args(self, elts: list[ast.expr]) -> list[Any]:
        """Positional arguments; `*sizes` of a length known only at run time (`x.view(*s[:-1], -1, 2)`)
        folds every positional argument into one sequence of ints, the varargs form of int-list ops."""
        values: list[tuple[bool, Any]] = []
        for e in elts:
            if isinstance(e, ast.Starred):
                values.append((True, self.value(e.value)))
            else:
                values.append((False, self.value(e)))
        if not any(starred and getattr(v, "kind", None) in (Kind.INTS, Kind.INT_LIST) for starred, v in values):
            out: list[Any] = []
            for (starred, v), e in zip(values, elts, strict=True):
                if starred and not isinstance(v, ir.Tup):
                    raise self.error(e, "`*` of a sequence whose length is only known at run time")
                out.extend(v.items if starred else [v])
            return out
        seq = None
        for (starred, v), e in zip(values, elts, strict=True):
            piece = self.as_ints(e, v if starred else ir.Tup((v,)))
            seq = piece if seq is None else self.intrinsic("seq_concat", Kind.INTS, seq, piece)
        return [seq]

    def method_call(self, node: ast.Call, m: TensorMethod, args: list, kwargs: dict) -> Any:
        t, name = m.receiver, m.name
        if name == "size":
            if not args and not kwargs:
                return self.sized(self.intrinsic("tensor_sizes", Kind.INTS, t))
            d = args[0] if args else kwargs.get("dim", kwargs.get("axis"))  # the parser's NumPy name too
            if getattr(d, "kind", None) == Kind.INT and len(args) + len(kwargs) == 1:
                return self.intrinsic("tensor_size", Kind.INT, t, d)
        if name == "dim" and not args and not kwargs:
            return self.intrinsic("tensor_dim", Kind.INT, t)
        if name == "numel" and not args and not kwargs:
            return self.intrinsic("tensor_numel", Kind.INT, t)
        if name == "type":
            return self.tensor_type(node, t, args, kwargs)
        if name == "tolist":
            return self.tensor_tolist(node, t, args, kwargs)
        if name == "item" and not args and not kwargs:  # a Python number whose type the dtype decides
            return self.call_op(node, ops.OpSpec("item"), [t], {}, method=True, display="Tensor.item")
        adapter = adapters.METHODS.get(name)
        python_method = getattr(torch.Tensor, name, None)
        if torch_source.holds(python_method):  # Tensor.split, .unflatten, ...: torch/_tensor.py's source first
            made = self.torch_source_call(node, python_method, [t] + args, kwargs, restated=adapter is not None)
            if made is not NotImplemented:
                return made
        if adapter is not None:
            return self.call_adapter(node, adapter, [t] + args, kwargs)
        spec = ops.method_spec(name)
        if spec is None:
            raise self.error(
                node.func,
                f"Tensor method `.{name}()` is not supported in a region",
                "ppy_magic.supported_ops() lists what regions can call.",
            )
        return self.call_op(node, spec, [t] + args, kwargs, method=True, display=f"Tensor.{name}")

    def static_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        if isinstance(fn, functools.partial):  # a callable a call passed in: its function, with its arguments first
            bound = [self.python_value(node, v) for v in fn.args]
            keywords = {k: self.python_value(node, v) for k, v in fn.keywords.items()}
            return self.static_call(node, fn.func, bound + args, {**keywords, **kwargs})
        display = ast.unparse(node.func)
        if fn is adapters.unsupported:
            raise Unsupported(self.message(node.args[0]) if node.args else "unsupported")
        if fn is warnings.warn:
            return self.warn(node, args, kwargs)
        if fn is torch.finfo or fn is torch.iinfo:
            return self.type_info_call(node, fn, args, kwargs)
        if fn in TORCH_FUNCTION_CHECKS:
            return self.torch_function_check(node, fn, args, kwargs)
        if fn in NEVER_IN_A_REGION and not args and not kwargs:
            return ir.Const(False, Kind.BOOL)
        if fn in (torch.jit.annotate, typing.cast) and len(args) == 2 and not kwargs:  # the value, as in Python
            return args[1]
        if fn in TORCH_CHECKS:
            return self.torch_check(node, fn, args, kwargs)
        if fn in SETTINGS and not args and not kwargs:  # read when the region runs, as each call of Python reads it
            return self.intrinsic(SETTINGS[fn], Kind.BOOL)
        if fn in MATH_FUNCTIONS:
            return self.math_call(node, fn, args, kwargs)
        made = self.constructor_call(node, fn, args, kwargs)  # torch.tensor, torch.FloatTensor, ... (constructors)
        if made is not NotImplemented:
            return made
        if fn is type and len(args) == 1 and not kwargs and isinstance(args[0], ModuleValue):
            return self.class_of(node, args[0])
        if fn is getattr:
            return self.getattr_call(node, args, kwargs)
        if fn in (len, int, float, bool, str, abs, min, max, isinstance):
            return self.builtin_call(node, fn, args, kwargs)
        if fn is slice and not kwargs and 1 <= len(args) <= 3:  # an index item, as `a:b:c` is
            bounds = [None, *args, None][-3:] if len(args) == 1 else [*args, None][:3]
            return SliceValue(tuple(bounds))
        if fn in CONSUMERS:
            raise self.error(node, f"{fn.__name__}() with these arguments is not supported in a region")
        name = adapters.lookup(fn)
        if torch_source.holds(fn):  # torch's own Python: its source, else the adapter restating it (if any)
            made = self.torch_source_call(node, fn, args, kwargs, restated=name is not None)
            return made if made is not NotImplemented else self.call_adapter(node, name, args, kwargs)
        if name is not None:
            return self.call_adapter(node, name, args, kwargs)
        operation = einops_forms.functions().get(id(fn))
        if operation is not None:
            return self.einops_call(node, operation, args, kwargs)
        callee = self.callee_def(fn)
        if callee is not None:
            return self.call_user(node, callee, args, kwargs)
        spec = ops.function_spec(fn)
        if spec is not None:
            return self.call_op(node, spec, args, kwargs, method=False, display=display)
        if isinstance(fn, types.FunctionType) and not fn.__module__.startswith("torch"):
            raise self.error(node.func, PLAIN_FUNCTION.format(name=display), PLAIN_FUNCTION_HINT)
        raise self.error(
            node.func,
            f"`{display}` is not supported in a region",
            "Regions call torch operators and other @ppy.opt functions; ppy_magic.supported_ops() lists the operators.",
        )

    def einops_call(self, node: ast.Call, operation: str, args: list, kwargs: dict) -> Any:
        """``einops.rearrange(x, pattern, **axes)`` (and repeat, reduce) with a pattern known when compiling:
        the function einops_forms writes for the pattern, compiled like a callee."""
        display = f"einops.{operation}"
        names = ["tensor", "pattern", "reduction"] if operation == "reduce" else ["tensor", "pattern"]
        if len(args) > len(names):
            raise self.error(node, f"{display}() takes {len(names)} positional arguments but {len(args)} were given")
        bound = dict(zip(names, args, strict=False))
        axes = {}
        for k, v in kwargs.items():
            if k in names and k not in bound:
                bound[k] = v
            elif k in names:
                raise self.error(node, f"{display}() got multiple values for argument '{k}'")
            else:
                axes[k] = v
        if set(names) - set(bound):
            raise self.error(node, f"{display}() missing required argument '{min(set(names) - set(bound))}'")
        if getattr(bound["tensor"], "kind", None) != Kind.TENSOR:
            raise self.error(node, f"{display}() of {ops.describe(bound['tensor'])} (not one tensor) is not compiled")
        texts = {}
        for k in names[1:]:
            v = bound[k]
            if not (isinstance(v, ir.Const) and v.kind == Kind.STR):
                raise self.error(node, f"{display}() needs its {k} as a str known when compiling")
            texts[k] = v.value
        reduction = texts.get("reduction", operation)
        if operation == "reduce" and reduction not in einops_forms.REDUCTIONS:
            raise self.error(node, f"{display}() with the reduction {reduction!r} is not compiled")
        for k, v in axes.items():
            if getattr(v, "kind", None) != Kind.INT:
                raise self.error(node, f"{display}() with the axis length {k}={ops.describe(v)} (not an int)")
        try:
            fdef, lines = einops_forms.specialised(reduction, texts["pattern"], tuple(axes))
        except Exception as exc:  # noqa: BLE001 - a pattern einops cannot read: Python raises its error there
            raise self.error(node, f"{display}() of the pattern {texts['pattern']!r} is not compiled ({exc})") from None
        g = Globals(einops_forms.namespace())
        args = [bound["tensor"], *axes.values()]
        return self.call_helper(node, fdef, g, "<einops>", lines, args, {}, adapter=True, display=display)

    def torch_function_check(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> ir.Const:
        """`has_torch_function_unary(input)` and its kin, as torch's own source asks before its ops: False for
        every value a region holds (its guard sent tensor subclasses, `__torch_function__` overrides and
        modes to the Python body); of a constant the region compiled in, what Python answers."""
        one_argument = fn is not torch.overrides.has_torch_function_variadic  # an object, or an iterable of them
        if kwargs or (one_argument and len(args) != 1):
            raise self.error(node, f"{fn.__name__}() with these arguments is not supported in a region")
        items = args[0].items if fn is torch.overrides.has_torch_function and isinstance(args[0], ir.Tup) else args
        constants = []
        for v in items:
            if isinstance(v, Static):
                constants.append(v.value)
            elif isinstance(v, ir.Tup) or getattr(v, "kind", None) is None:
                raise self.error(node, f"{fn.__name__}() of {ops.describe(v)} is not supported in a region")
        if torch.overrides.has_torch_function(constants):
            raise self.error(node, f"{fn.__name__}(): a value compiled into the region overrides torch functions")
        return ir.Const(False, Kind.BOOL)

    def python_value(self, node: ast.AST, v: Any) -> Any:
        """A Python object known when compiling, as a value of the region (a constant, or the object)."""
        if isinstance(v, torch.Tensor):
            raise self.error(node, "a functools.partial holding a tensor is not supported in a region")
        c = constant(v)
        return c if c is not None else Static(v)

    # Warning categories a region can raise: c10's, which the runtime turns into Python's when the call ends.
    _WARNINGS = {UserWarning: "warn", DeprecationWarning: "warn_deprecated"}

    def torch_check(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        """``torch._check_value(cond, lambda: message)`` (torch's own functions check their arguments so): as
        torch's ``_check_with`` runs it, for a bool `cond` and a message callable."""
        params = dict(zip(("cond", "message"), args, strict=False))
        for k, v in kwargs.items():
            if k not in ("cond", "message") or k in params:
                raise self.error(node, f"torch.{fn.__name__}() got an unexpected or repeated argument '{k}'")
            params[k] = v
        cond, message = params.get("cond"), params.get("message", ir.Const(None, Kind.NONE))
        if getattr(cond, "kind", None) != Kind.BOOL:
            raise self.error(node, f"torch.{fn.__name__}() of {ops.describe(cond)} (not a bool) is not compiled")
        if isinstance(message, ir.Const):
            raise self.error(node, f"torch.{fn.__name__}() without a message callable is not compiled")
        fdef, lines = _check_definition(TORCH_CHECKS[fn])
        return self.call_helper(node, fdef, Globals({}), "<adapter>", lines, [cond, message], {}, adapter=True)

    def warn(self, node: ast.Call, args: list, kwargs: dict) -> ir.Const:
        """warnings.warn(message[, category][, stacklevel]): issued when the region returns, located at its
        caller (the region has no Python frames of its own)."""
        params = dict(zip(("message", "category", "stacklevel"), args, strict=False))
        for k, v in kwargs.items():
            if k not in ("message", "category", "stacklevel") or k in params:
                raise self.error(node, f"warnings.warn() with {k}= is not supported in a region")
            params[k] = v
        category = params.get("category", ir.Const(None, Kind.NONE))
        if isinstance(category, ir.Const) and category.kind == Kind.NONE:
            category = Static(UserWarning)
        name = self._WARNINGS.get(category.value) if isinstance(category, Static) else None
        if name is None or "message" not in params:
            raise self.error(
                node,
                "a region can issue warnings.warn(message) of a UserWarning or a DeprecationWarning only",
                "Warn outside the region, or keep this function Python.",
            )
        message = params["message"]
        if not (getattr(message, "kind", None) == Kind.STR):
            raise self.error(node, "warnings.warn() in a region takes a str message")
        self.check(name, message)
        return ir.Const(None, Kind.NONE)

    def known_instance(self, v: Any, cls: type) -> bool | None:
        """isinstance(v, cls) where compiling decides it: a value compiled in (None, a callable, an object), or a
        module of a class that exists (each call is checked to hold exactly that class); None elsewhere."""
        if isinstance(v, ir.Const) and v.kind == Kind.NONE:
            return isinstance(None, cls)
        if isinstance(v, Static):
            return isinstance(v.value, cls)
        if isinstance(v, ModuleValue) and v.mtype.cls is not None and v.mtype.cls.obj is not None:
            return issubclass(v.mtype.cls.obj, cls)
        return None

    def math_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        if kwargs or len(args) != 1 or getattr(args[0], "kind", None) not in ir.SCALAR_KINDS:
            raise self.error(node, f"math.{fn.__name__} takes one number in a region")
        if isinstance(args[0], ir.Const):
            return self.fold(node, fn, args[0])
        return self.intrinsic(f"math.{fn.__name__}", MATH_FUNCTIONS[fn], self.as_float(args[0]))

    def builtin_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        if kwargs:
            raise self.error(node, f"{fn.__name__}() with keywords is not supported in a region")
        if fn is isinstance and len(args) == 2 and isinstance(args[1], ir.Tup) and args[1].items:
            parts = [self.builtin_call(node, fn, [args[0], t], {}) for t in args[1].items]
            return ir.Const(any(p.value for p in parts), Kind.BOOL)  # each is known when compiled
        if fn is isinstance and len(args) == 2 and isinstance(args[1], Static) and isinstance(args[1].value, type):
            known = self.known_instance(args[0], args[1].value)
            if known is not None:
                return ir.Const(known, Kind.BOOL)
        if fn is isinstance and len(args) == 2 and isinstance(args[1], Static):
            want = args[1].value
            kinds = {
                int: (Kind.INT, Kind.BOOL),
                float: (Kind.FLOAT,),
                bool: (Kind.BOOL,),
                torch.Tensor: (Kind.TENSOR,),
                torch.dtype: (Kind.DTYPE,),
                torch.device: (Kind.DEVICE,),
                str: (Kind.STR,),
                tuple: (Kind.INTS, Kind.TENSORS),  # run-time tuples (a torch.Size is one)
                list: (*ir.LIST_KINDS, Kind.NUMBERS),
                # symbolic numbers exist only while torch traces; a region is given real ones
                torch.SymInt: (),
                torch.SymFloat: (),
                torch.SymBool: (),
                # torch.nn.modules.utils._ntuple asks it: tensors, strings and sequences iterate
                collections.abc.Iterable: (Kind.TENSOR, Kind.STR, *ir.SEQUENCE_KINDS, Kind.NUMBERS),
                collections.abc.Sequence: (Kind.STR, *ir.SEQUENCE_KINDS, Kind.NUMBERS),  # a tensor is not one
            }
            if want in kinds:
                v = args[0]
                if isinstance(v, ir.Tup):
                    return ir.Const(issubclass(list if v.is_list else tuple, want), Kind.BOOL)
                kind = getattr(v, "kind", None)
                # what it could be when the region runs: an X or None; a number of any type; a list parameter,
                # a list or a tuple as the caller passed it (None and the others are never the types above)
                if kind in ir.HELD_BY:
                    answers = {ir.HELD_BY[kind] in kinds[want], False}
                elif kind == Kind.NUMBER:
                    answers = {k in kinds[want] for k in (Kind.INT, Kind.FLOAT, Kind.BOOL)}
                elif isinstance(v, ir.Var) and v.name in self.param_vars:  # a list or a tuple, as passed
                    answers = {issubclass(list, want), issubclass(tuple, want)}
                else:
                    answers = {kind in kinds[want]}
                if len(answers) > 1:
                    raise self.error(
                        node,
                        f"isinstance() of {ops.describe(v)} is decided by the value the region is given, "
                        "not when it compiles",
                        "Test `x is None`, or convert it first: list(xs), tuple(xs), float(n).",
                    )
                return ir.Const(answers.pop(), Kind.BOOL)
        if fn is str and len(args) == 1:
            pieces = self.formatted(node, args[0])
            if all(isinstance(p, ir.Const) for p in pieces):
                return ir.Const("".join(p.value for p in pieces), Kind.STR)
            return self.intrinsic("str_concat", Kind.STR, *pieces)
        if len(args) == 1 and isinstance(args[0], ModuleValue) and fn is len:
            return self.module_len(node, args[0])
        if len(args) == 1:
            v = args[0]
            kind = getattr(v, "kind", None)
            if isinstance(v, ir.Const) and fn is not len:
                return self.fold(node, fn, v)
            if fn is len:
                if isinstance(v, ir.Tup):
                    return ir.Const(len(v.items), Kind.INT)
                if kind == Kind.TENSOR:
                    return self.intrinsic("tensor_len", Kind.INT, v)
                if kind in ir.SEQUENCE_KINDS:
                    return self.intrinsic("seq_len", Kind.INT, v)
                if kind == Kind.NUMBERS:
                    return self.intrinsic("numbers_len", Kind.INT, v)
            if kind == Kind.TENSOR and fn in (float, int, bool):  # Tensor.__float__/__int__/__bool__
                if fn is bool:
                    return self.truth_of(node, v)
                return self.intrinsic("tensor_to_float" if fn is float else "tensor_to_int", _KIND_OF[fn], v)
            if kind == Kind.NUMBER and fn in (float, int, bool, abs):
                if fn is bool:
                    return self.truth_of(node, v)
                names = {float: "number_to_float", int: "number_to_int", abs: "number_abs"}
                return self.intrinsic(names[fn], Kind.NUMBER if fn is abs else _KIND_OF[fn], v)
            if fn is float and kind in (Kind.INT, Kind.BOOL, Kind.FLOAT):
                return self.as_float(v)
            if fn is int and kind in (Kind.INT, Kind.BOOL):
                return self.as_int(v)
            if fn is int and kind == Kind.FLOAT:
                return self.intrinsic("float_to_int", Kind.INT, v)
            if fn is bool and kind in (*ir.SCALAR_KINDS, *ir.SEQUENCE_KINDS):
                return self.truth_of(node, v)
            if fn is abs and kind == Kind.FLOAT:
                return self.intrinsic("math.fabs", Kind.FLOAT, v)
            if fn is abs and kind in (Kind.INT, Kind.BOOL):
                return self.intrinsic("int_abs", Kind.INT, self.as_int(v))
        if fn in (min, max) and len(args) >= 2:
            kinds = {getattr(a, "kind", None) for a in args}
            if len(kinds) == 1 and kinds.pop() in (Kind.INT, Kind.FLOAT):
                if all(isinstance(a, ir.Const) for a in args):
                    return self.fold(node, fn, *args)
                out = args[0]
                for a in args[1:]:  # Python keeps the first of equal values
                    out = self.intrinsic(fn.__name__, out.kind, out, a)
                return out
            return self.extreme(node, fn, (node, StaticIteration(tuple(args)), []))
        raise self.error(node, f"{fn.__name__}() with these arguments is not supported in a region")

    _OPTIONAL_SCALARS = {Kind.INT: "optional_int", Kind.FLOAT: "optional_float", Kind.BOOL: "optional_bool"}

    def optional_scalar(self, value: Any) -> Any:
        """A number-or-None attribute (``self.eps``) passed to an op: one optional value, as ATen's `float?` takes."""
        if isinstance(value, OptionalScalar) and getattr(value.value, "kind", None) in self._OPTIONAL_SCALARS:
            kind = value.value.kind
            return self.intrinsic(self._OPTIONAL_SCALARS[kind], ir.OPTIONAL_OF[kind], value.none, value.value)
        return value

    def call_op(
        self,
        node: ast.AST,
        spec: ops.OpSpec,
        args: list,
        kwargs: dict,
        method: bool = False,
        display: str | None = None,
    ) -> Any:
        args = [self.optional_scalar(a) for a in args]
        kwargs = {k: self.optional_scalar(v) for k, v in kwargs.items()}
        overload, bound = ops.resolve(spec, args, kwargs, method=method, display=display or spec.aten)
        kinds = ops.result_kinds(overload)
        if kinds is None:
            raise self.error(
                node,
                f"{display or spec.aten} returns {', '.join(overload.returns)}, "
                "which a region cannot represent exactly",
            )
        call = ir.Call(overload, bound)
        if overload.is_inplace:
            self.emit(ir.Effect(call, self.line()))
            return bound[0]  # in-place ops return self: the same tensor
        if len(kinds) == 1:
            return self.assign(call, kinds[0])
        targets = tuple(self.new_var("t", k) for k in kinds)
        self.emit(ir.Assign(targets, call, self.line()))
        return ir.Tup(targets, ops.result_type(overload))
