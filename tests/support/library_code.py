"""Library code for tests/test_library.py: an importable module nobody decorated, written as libraries write it
(decorators that wrap, ``**kwargs`` passed through, a config object, an output dataclass, helpers at module
level, methods calling methods)."""

from __future__ import annotations

import enum
import functools
import warnings
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    dim: int = 16
    hidden: int = 32
    layers: int = 2
    eps: float = 1e-5
    dropout: float = 0.1


@dataclass
class Output:
    last_hidden_state: torch.Tensor
    aux: torch.Tensor | None = None


def renames_kwarg(old: str, new: str):
    """Like transformers' deprecate_kwarg: a wrapper with logic of its own."""

    def wrapper(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapped

    return wrapper


class Action(str, enum.Enum):
    NONE = "none"
    NOTIFY = "notify"
    RAISE = "raise"


def deprecated_kwarg(old: str, new: str, raise_if_both: bool = False):
    """As transformers' deprecate_kwarg is written: an enum of actions, the class's name for a message, the
    keywords tested by name; for a call that passes neither name, all of it is decided when compiling."""

    def wrapper(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            func_name = f"{args[0].__class__.__name__}.{func.__name__}"
            action = Action.NONE
            message = None
            if old in kwargs and new in kwargs:
                action = Action.RAISE if raise_if_both else Action.NOTIFY
                message = f"both `{old}` and `{new}` given to {func_name}"
                kwargs.pop(old)
            elif old in kwargs:
                action = Action.NOTIFY
                message = f"`{old}` is deprecated for {func_name}: use `{new}`"
                kwargs[new] = kwargs.pop(old)
            if action == Action.RAISE:
                raise ValueError(message)
            elif action in (Action.NOTIFY,) and type(args[0]) is not None:
                warnings.warn(message, FutureWarning, stacklevel=2)
            return func(*args, **kwargs)

        return wrapped

    return wrapper


def documented(fn):
    """Like a docstring decorator: returns the function itself."""
    fn.__doc__ = (fn.__doc__ or "") + "\n(documented)"
    return fn


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def scale_by(x, factor=2.0):
    return x * factor


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.up = nn.Linear(config.dim, config.hidden)
        self.down = nn.Linear(config.hidden, config.dim)
        self.drop = nn.Dropout(config.dropout)

    @documented
    def forward(self, x, **kwargs):
        return self.drop(self.down(gelu_tanh(self.up(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.norm = RMSNorm(config.dim, config.eps)
        self.mlp = MLP(config)
        self.config = config

    def residual(self, x, h):
        return x + h

    @renames_kwarg("hidden", "x")
    def forward(self, x, mask=None, **kwargs):
        h = self.mlp(self.norm(x), **kwargs)
        if mask is not None:
            h = h * mask
        return self.residual(x, h)


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.layers)])
        self.out = nn.Linear(config.dim, config.dim)
        self.calls = {}  # a dict on the instance: the line using it runs as Python

    @torch.no_grad()
    def summary(self, x):
        return x.abs().max()

    def forward(self, x, mask=None, cache=None, **kwargs):
        if not isinstance(self.config, Config) or isinstance(cache, Config):  # decided when compiling
            raise TypeError("a Config, please")
        for block in self.blocks:
            x = block(x, mask=mask, **kwargs)
        self.calls["n"] = self.calls.get("n", 0) + 1
        h = scale_by(self.out(x))
        return Output(h, aux=torch.relu(h).sum(-1))


def keep_last(hidden, keep):
    """transformers' slice_logits_to_keep, as written there: an int becomes a slice object."""
    if isinstance(keep, int):
        keep = slice(-keep, None)
    return hidden[:, keep, :]


def split_heads(x, heads):
    """A shape built from a run-time shape: `(*x.shape[:-1], heads, -1)`."""
    shape = (*x.shape[:-1], heads, -1)
    return x.view(shape).transpose(1, 2) * len((*x.shape,))


class ShapeError(ValueError):
    """A library's own exception class, raised from code a region compiles."""


class Errors:
    class Nested(RuntimeError):
        pass


def checked_scale(x, factor):
    if x.dim() != 2:
        raise ShapeError(f"expected a 2-D input, got {x.dim()} dimensions")
    if factor < 0:
        raise Errors.Nested("a negative factor")
    return x * factor


def identity(t, *args, **kwargs):
    return t


def maybe(fn=None):
    """x-transformers' idiom: a function made per call, wrapped with functools.wraps."""
    if fn is None:
        fn = identity

    @functools.wraps(fn)
    def inner(x, *args, **kwargs):
        if x is None:
            return x
        return fn(x, *args, **kwargs)

    return inner


class MaybeNorm(nn.Module):
    def __init__(self, dim, norm):
        super().__init__()
        self.norm = nn.LayerNorm(dim) if norm else None
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(maybe(self.norm)(x)) + maybe()(x)


class Doubler(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    @renames_kwarg("inp", "x")
    def forward(self, x, scale=2.0):
        return self.proj(x) * scale


class Shifter(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    @deprecated_kwarg("value", "x")
    def forward(self, x, shift=1.0):
        return torch.tanh(self.proj(x)) + shift


@renames_kwarg("inp", "x")
def doubled(x):
    return x * 2


@renames_kwarg("value", "x")
def shifted(x):
    return x + 1


class TwoWrapped(nn.Module):
    """Two submodules whose forwards the same decorator wraps (one wrapper's code, two closures): each
    compiles inline, through its own wrapper, into the caller's region."""

    def __init__(self, dim=16):
        super().__init__()
        self.twice = Doubler(dim)
        self.lift = Shifter(dim)

    def forward(self, x):
        return self.lift(self.twice(x, scale=3.0)) + self.twice(x) + doubled(x) * shifted(x)


class PartialAct(nn.Module):
    """x-transformers' idiom: a functools.partial made in __init__, one per instance."""

    def __init__(self, dim, axis):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.act = functools.partial(torch.softmax, dim=axis)

    def forward(self, x):
        return self.act(self.proj(x))


class PartialStack(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.layers = nn.ModuleList([PartialAct(dim, -1), PartialAct(dim, -1), PartialAct(dim, 0)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class NamedConfig:
    """A plain config whose field a property reads, as transformers' `config._attn_implementation` does."""

    def __init__(self, mode: str = "scale", factor: float = 2.0):
        self._mode = mode
        self.factor = factor

    @property
    def mode(self):
        return self._mode

    @property
    def offset(self):  # a getter a region cannot take: read in Python before its statement
        try:
            return self.factor / 2
        except AttributeError:
            return 0.0


class RemappedConfig:
    """A config whose class's own __getattribute__ decides what a read gives, as transformers' configs do:
    names of `attribute_map` read another field, and a field of `per_layer` raises once `layered` is set."""

    attribute_map = {"factor": "scale"}
    per_layer = ("factor", "shift")

    def __init__(self, factor: float, scale: float, shift: float):
        self.__dict__.update(factor=factor, scale=scale, shift=shift, layered=False)

    def __getattribute__(self, key):
        if key in type(self).per_layer and object.__getattribute__(self, "layered"):
            raise LayeredFieldError(f"{key!r} is a per-layer field")
        if key in type(self).attribute_map:
            key = type(self).attribute_map[key]
        return object.__getattribute__(self, key)


class LayeredFieldError(AttributeError):
    pass


class ModeSwitch(nn.Module):
    def __init__(self, config, dim=16):
        super().__init__()
        self.config = config
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.proj(x)
        if self.config.mode == "scale":
            return h * self.config.factor
        if self.config.mode == "offset":
            return h - self.config.offset
        return h + self.config.factor


class Remapped(ModeSwitch):
    def forward(self, x):
        return self.proj(x) * self.config.factor + self.config.shift


def doubled_unless_scripting(x):
    """As torch's and libraries' code asks it: torch.jit.is_scripting() is False wherever Python runs."""
    if torch.jit.is_scripting() or x.is_nested:
        return x
    return x * 2


class Defaults(nn.Module):
    """Reads optional fields of its config, and an optional submodule, with getattr(obj, name, default), as
    library code does."""

    def __init__(self, config, dim=16):
        super().__init__()
        self.config = config
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.proj(x) * getattr(self.config, "scale", 1.0)
        if getattr(self.config, "use_shift", False):
            h = h + getattr(self.config, "shift")  # noqa: B009 - the two-argument form, as library code writes it
        extra = getattr(self, "extra", None)
        if extra is not None:
            h = extra(h)
        return h


class LegacyBase(nn.Module):
    """A base whose one method is a classmethod under a decorator of another file (torch's no_grad wraps it
    with code of torch's), as diffusers' LegacyModelMixin has its from_pretrained under a hub-argument check."""

    @classmethod
    @torch.no_grad()
    def build(cls, *args):
        return cls(*args)


class FromLegacy(LegacyBase):
    def __init__(self, dim=16):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.relu(self.proj(x)) * 2.0


class ConfigAnswering(nn.Module):
    """Answers its config's fields from a __getattr__ of its own, before nn.Module's (diffusers' ModelMixin):
    a name found past the instance and the class may be a config field rather than a submodule."""

    def __init__(self, **config):
        super().__init__()
        self.__dict__["_internal"] = dict(config)

    def __getattr__(self, name):
        internal = self.__dict__.get("_internal", {})
        if name in internal and name not in self.__dict__:
            return internal[name]
        return super().__getattr__(name)


class Answered(ConfigAnswering):
    def __init__(self, dim=16, **config):
        super().__init__(**config)
        self.proj = nn.Linear(dim, dim)
        self.scale = 2.0

    def forward(self, x):
        return torch.tanh(self.proj(x)) * self.scale


class StateMixer(nn.Module):
    """Writes into a state list it is passed and hands the list back (transformers' RWKV attention)."""

    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, state):
        y = self.proj(x)
        state[0][:, 0] = y[:, -1]
        return y.relu(), state


class StateBlock(nn.Module):
    """Passes a state list through a submodule and returns it in a tuple, as the caller's own list (RWKV's
    blocks)."""

    def __init__(self, dim=8):
        super().__init__()
        self.mixer = StateMixer(dim)

    def forward(self, x, state):
        y, state = self.mixer(x, state)
        out = (y * 2, state)
        return out
