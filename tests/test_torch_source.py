"""torch's own Python-level functions compiled from the installed torch's source (``torchlib/torch_source.py``).

A call of ``F.cross_entropy`` in a region compiles torch's ``cross_entropy`` and the helpers it calls
(``_Reduction.get_enum``), not a restatement of it; where torch's source does not compile for a call
(``F.max_pool2d``'s ``boolean_dispatch`` reads ``kwargs[...]``), the adapter takes it. Either way the
results are eager's, bit for bit, and an error inside torch's code points at the user's line.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ppy_magic
from ppy_magic.torchlib import torch_source
from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import MATCH

CELL = """
import torch
import torch.nn.functional as F
import ppy


@ppy.opt(3)
def loss(x, w, b, target):
    h = F.layer_norm(x, (x.shape[-1],), w, b)
    p = F.softmax(h, dim=-1)
    return F.cross_entropy(h, target, label_smoothing=0.1), F.normalize(p, dim=-1)


@ppy.opt(3)
def grid(x, y):
    return torch.meshgrid(x, y, indexing="ij")


@ppy.opt(3)
def picks(x, target):
    y = x * 2
    return F.nll_loss(y, target)
"""


@pytest.fixture(scope="module")
def cell():
    ns, _ = compile_cell(CELL, filename="<torch-source>")
    return ns


def _inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=g, requires_grad=True)
    w = torch.randn(8, generator=g, requires_grad=True)
    return x, w, torch.randn(8, generator=g), torch.tensor([1, 0, 7, 3])


def test_functional_calls_compile_from_torchs_source_and_match_eager(cell):
    f = cell["loss"]
    assert is_region(f)
    assert compare_call(f, _inputs())[0] == MATCH  # gradients included
    text = str(ppy_magic.explain(f))
    line = next(ln for ln in text.splitlines() if "compiled from torch's own source" in ln)
    for name in ("F.cross_entropy", "F.layer_norm", "F.softmax", "F.normalize"):
        assert name in line, text
    # torch's cross_entropy maps its reduction through torch.nn._reduction.get_enum: a helper of its own
    # in the region's C++, which no restatement of cross_entropy has
    assert "get_enum(" in f.__ppy_info__.spec.cpp
    # torch's module globals are torch's: not shown as the user's globals frozen at compile time
    assert "_Reduction" not in text and "has_torch_function" not in text, text


def test_where_torchs_source_does_not_compile_the_adapter_takes_the_call(cell):
    """torch.meshgrid's source builds a dict of keywords, which a region does not take (should it one day,
    pick another function whose source does not compile)."""
    f = cell["grid"]
    x, y = torch.randn(3, requires_grad=True), torch.randn(4, requires_grad=True)
    assert is_region(f) and compare_call(f, (x, y))[0] == MATCH
    assert "compiled from torch's own source" not in str(ppy_magic.explain(f))
    assert "torch.meshgrid" in torch_source.fallbacks  # and why, for functional_coverage's report
    why = "a dict is not supported in a region (in torch's `torch._meshgrid`)"  # the helper torch's source calls
    assert torch_source.how_compiled("torch.meshgrid") == f"the adapter: its source {why}"


def test_an_error_inside_torchs_source_points_at_the_users_line(cell):
    f = cell["picks"]
    x = torch.randn(3, 5)
    with pytest.raises(IndexError) as eager:
        f.__wrapped__(x, torch.tensor([0, 9, 1]))
    with pytest.raises(IndexError) as region:
        f(x, torch.tensor([0, 9, 1]))
    assert str(region.value).splitlines()[0] == str(eager.value).splitlines()[0]
    # the note names the call's line in the cell, not a line of torch/nn/functional.py
    line = CELL.splitlines().index("    return F.nll_loss(y, target)") + 1
    assert region.value.__notes__ == [f"ppy region 'picks', line {line}: return F.nll_loss(y, target)"]


FORMS = """
import collections.abc
import itertools
import typing

import torch
import torch.nn.functional as F
import ppy


@ppy.opt(3)
def keyword(**kwargs):
    return kwargs["scale"] if "scale" in kwargs else 1.0


@ppy.opt(3)
def forms(x):
    import math
    from torch.nn import functional as G

    sizes = torch.jit.annotate(list[int], [])
    kept = typing.cast(typing.Optional[torch.Tensor], x)
    pair = tuple(itertools.repeat(x.shape[0], 2))
    flags = (
        isinstance(pair, collections.abc.Iterable),
        isinstance(x, collections.abc.Iterable),
        isinstance(x.shape[0], (int, torch.SymInt)),
        isinstance(2.5, collections.abc.Iterable),
    )
    return G.relu(kept) * math.pi * keyword(scale=2.0) * keyword(), sizes, pair, flags


@ppy.opt(3)
def sequences(x, sizes: list[int]):
    # a list parameter is a list or a tuple as the caller passed it: either is an Iterable and a Sequence
    if isinstance(sizes, collections.abc.Iterable) and isinstance(sizes, collections.abc.Sequence):
        return x.reshape(sizes)
    return x


@ppy.opt(3)
def settings(x):
    if torch.are_deterministic_algorithms_enabled():
        return x + 1
    if torch.compiler.is_compiling() or not torch.is_grad_enabled():
        return x - 1
    return x * 2


@ppy.opt(3)
def norms(x, running_mean, running_var, w):
    # torch's source passes torch.backends.cudnn.enabled on to aten::batch_norm and aten::layer_norm
    out = F.batch_norm(x, running_mean, running_var) + F.layer_norm(x, (x.shape[-1],), w)
    if torch.backends.cudnn.enabled and not torch.backends.cudnn.deterministic:
        return out
    return -out


@ppy.opt(3)
def checked(x, n: int):
    sizes = list(x.shape)
    scratch = x * 2
    del scratch
    if n < 0:
        raise ValueError(f"bad sizes {sizes} for {n}")
    return x + n


@ppy.opt(3)
def guarded(x, n: int, lower=1.0 / 8):
    torch._check_value(n >= 0, lambda: f"n must be at least 0, got {n}")
    flags = isinstance((n,), collections.abc.Sequence), isinstance(x, collections.abc.Sequence)
    return x * lower + n, flags


@ppy.opt(3)
def deleted(x):
    y = x * 2
    del y
    return y


@ppy.opt(3)
def not_yet(x):
    import ppy_magic_never_imported_module
    return x
"""


@pytest.fixture(scope="module")
def forms_cell():
    ns, report = compile_cell(FORMS, filename="<torch-source-forms>")
    return ns, report


def test_the_forms_torchs_source_is_written_in_compile_as_python_runs_them(forms_cell):
    ns, _ = forms_cell
    f = ns["forms"]
    x = torch.randn(3, 4)
    assert is_region(f) and compare_call(f, (x,))[0] == MATCH
    out = f(x)
    assert out[1] == [] and out[2] == (3, 3) and out[3] == (True, True, True, False)


def test_a_list_parameter_is_an_iterable_sequence_whether_a_list_or_a_tuple(forms_cell):
    ns, _ = forms_cell
    f = ns["sequences"]
    x = torch.randn(2, 6)
    assert is_region(f)
    for sizes in ([3, 4], (4, 3)):
        assert torch.equal(f(x, sizes), x.reshape(sizes))


def test_the_process_settings_are_read_when_the_region_runs_not_when_it_compiles(forms_cell):
    ns, _ = forms_cell
    f = ns["settings"]
    x = torch.randn(3)
    assert is_region(f) and torch.equal(f(x), x * 2)
    with torch.no_grad():
        assert torch.equal(f(x), x - 1)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.equal(f(x), x + 1)
    finally:
        torch.use_deterministic_algorithms(before)
    assert torch.equal(f(x), x * 2) and f.fallbacks == 0


def test_torchs_backend_flags_are_read_when_the_region_runs(forms_cell):
    """`torch.backends.cudnn.enabled = False` after the build reaches the region's aten::batch_norm and
    aten::layer_norm (their last argument), as it reaches eager's; a frozen flag would pick cuDNN on a GPU."""
    ns, _ = forms_cell
    f = ns["norms"]
    x, w = torch.randn(4, 3), torch.randn(3)
    mean, var = torch.zeros(3), torch.ones(3)
    want = F.batch_norm(x, mean, var) + F.layer_norm(x, (3,), w)

    def flags_passed():
        with torch.profiler.profile(record_shapes=True) as prof:
            out = f(x, mean, var, w)
        names = ("aten::batch_norm", "aten::layer_norm")
        return out, [e.concrete_inputs[-1] for e in prof.events() if e.name in names]

    assert is_region(f) and torch.equal(f(x, mean, var, w), want)
    # the flags() context manager: torch's test utilities, once imported, refuse plain assignment
    for flag in (True, False, True):
        with torch.backends.cudnn.flags(enabled=flag, deterministic=False):
            out, passed = flags_passed()
        assert passed == [flag, flag] and torch.equal(out, want if flag else -want)
    with torch.backends.cudnn.flags(enabled=True, deterministic=True):
        assert torch.equal(f(x, mean, var, w), -want)
    assert f.fallbacks == 0


def test_del_unbinds_a_name_and_a_run_time_list_formats_as_python_formats_it(forms_cell):
    ns, report = forms_cell
    f = ns["checked"]
    x = torch.randn(3, 2)
    assert is_region(f) and torch.equal(f(x, 2), x + 2)
    with pytest.raises(ValueError) as region:
        f(x, -1)
    with pytest.raises(ValueError) as eager:
        f.__wrapped__(x, -1)
    assert str(region.value) == str(eager.value) == "bad sizes [3, 2] for -1"
    assert not is_region(ns["deleted"])  # Python raises UnboundLocalError there; the region would not
    assert "'y' may be unbound here: it was deleted at line" in dict(report.python)["deleted"]


def test_torchs_argument_checks_raise_as_torch_raises_them(forms_cell):
    ns, _ = forms_cell
    f = ns["guarded"]
    x = torch.randn(3)
    assert is_region(f) and compare_call(f, (x, 2))[0] == MATCH  # lower=1.0 / 8: a default known when compiling
    assert f(x, 2)[1] == (True, False)
    with pytest.raises(ValueError) as region:
        f(x, -1)
    with pytest.raises(ValueError) as eager:
        f.__wrapped__(x, -1)
    assert str(region.value) == str(eager.value) == "n must be at least 0, got -1"


def test_importing_a_module_the_process_has_not_imported_says_so(forms_cell):
    ns, report = forms_cell
    assert not is_region(ns["not_yet"])
    why = dict(report.python)["not_yet"]
    assert "ppy_magic_never_imported_module, which this process has not imported yet" in why, why


MODULES = """
import torch
from torch import nn
import ppy


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.drop = nn.Dropout(0.25)
        self.conv = nn.Conv1d(8, 8, 3, padding=1)
        self.act = nn.GELU()

    @ppy.opt(3)
    def forward(self, x):
        h = self.drop(self.act(self.norm(self.lin(x))))
        return self.conv(h.transpose(0, 1).unsqueeze(0))
"""


def test_torch_nn_modules_forward_compiles_from_torchs_source_with_their_helpers():
    ns, _ = compile_cell(MODULES, filename="<torch-source-modules>")
    block = ns["Block"]()
    x = torch.randn(5, 8, requires_grad=True)
    for training in (False, True):
        block.train(training)
        torch.manual_seed(0)
        got = block(x)
        torch.manual_seed(0)
        want = ns["Block"].forward.__wrapped__(block, x)
        assert torch.equal(got, want)
        gx, gw = torch.autograd.grad(got.sum(), (x, block.lin.weight))
        ex, ew = torch.autograd.grad(want.sum(), (x, block.lin.weight))
        assert torch.equal(gx, ex) and torch.equal(gw, ew)
    assert block.forward.calls == 2 and block.forward.fallbacks == 0
    text = str(ppy_magic.explain(block.forward))
    line = next(ln for ln in text.splitlines() if "compiled from torch's own source" in ln)
    for name in ("nn.Linear.forward", "nn.LayerNorm.forward", "nn.Dropout.forward", "nn.Conv1d.forward"):
        assert name in line, text
    assert "_conv_forward(" in block.forward.__ppy_info__.spec.cpp  # Conv1d's helper method, from torch's source


def test_a_failed_attempt_leaves_nothing_in_the_region():
    """torch's source is tried first: what the attempt added (helpers, module reads, specialisations) is
    taken back when it fails, so the restatement's region is the one it would have been alone."""
    from ppy_magic.language import ir
    from ppy_magic.language.attr_types import ModType
    from ppy_magic.language.function import Context
    from ppy_magic.language.module_plan import LayoutBuilder, Slot

    ctx = Context()
    kept = LayoutBuilder(0, ModType(None))
    kept.slot(Slot("weight", "a", "T"))
    ctx.layouts.append(kept)
    ctx.specialised["kept"] = ("ppy_fn_0", None, ())
    before = (list(kept.slots), dict(kept.where), dict(ctx.specialised))
    saved = ctx.checkpoint()
    ctx.helpers.append(ir.Helper("ppy_fn_1_attempt", (), (), (), False))
    kept.slot(Slot("bias", "a", "T"))
    ctx.layouts.append(LayoutBuilder(1, ModType(None)))
    ctx.specialised["attempt"] = ("ppy_fn_1_attempt", None, ())
    ctx.frozen["x"] = 1
    ctx.torch_sources.add("F.attempt")
    ctx.grad_enabling = True
    ctx.restore(saved)
    assert (list(kept.slots), dict(kept.where), dict(ctx.specialised)) == before
    assert ctx.helpers == [] and ctx.layouts == [kept] and not ctx.frozen and not ctx.torch_sources
    assert not ctx.grad_enabling


UNRESTATED = """
import torch
from torch import nn
import ppy


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3, padding=1)
        self.pool = nn.AvgPool2d(2)
        self.maxp = nn.MaxPool2d(2, stride=1)
        self.up = nn.Upsample(scale_factor=2)
        self.shuffle = nn.PixelShuffle(2)
        self.shrink = nn.Hardshrink(0.3)
        self.unflat = nn.Unflatten(1, (2, 8))
        # a Sequential inside a Sequential: torch's one forward, on modules of two types (no recursion)
        self.seq = nn.Sequential(nn.Linear(16, 16), nn.Sequential(nn.ReLU(), nn.Linear(16, 16)))
        self.bn = nn.BatchNorm1d(16)  # _BatchNorm.forward calls self._check_input_dim(input) as a statement
        self.rms = nn.RMSNorm(16)  # eps=None: an optional float to ATen's float?
        self.up2 = nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1)  # _single() of a list parameter

    @ppy.opt(3)
    def forward(self, x, v):
        h = self.conv(v).sum(2)
        h = self.shuffle(self.up(self.maxp(self.pool(h))))
        return self.shrink(h), self.unflat(x), self.rms(self.bn(self.seq(x))), self.up2(self.conv(v).sum(2))
"""


def test_torch_nn_modules_nothing_restates_compile_from_torchs_source():
    """Conv3d, the pools, Upsample, PixelShuffle...: no restatement of ours, their forwards (and the methods
    they call) compile from torch's files into the one region; what static inference of torch's __init__
    cannot tell (Conv3d's padding_mode) is taken from the first call's values."""
    from ppy_magic import variants

    ns, report = compile_cell(UNRESTATED, filename="<torch-source-unrestated>")
    why = dict(report.python).get("Net.forward", "")
    assert why.startswith("at torch/nn/modules/conv.py:"), why  # a line of torch's file names that file
    net = ns["Net"]()
    x, v = torch.randn(3, 16, requires_grad=True), torch.randn(1, 2, 3, 8, 8)
    twin = ns["Net"]()
    twin.load_state_dict(net.state_dict())
    with variants.blocking():
        for training in (True, True, False):
            net.train(training), twin.train(training)
            got, want = net(x, v), ns["Net"].forward.__wrapped__(twin, x, v)
            assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
            assert torch.equal(net.bn.running_var, twin.bn.running_var)  # the running statistics too
    (gw,) = torch.autograd.grad(net(x, v)[0].sum(), (net.conv.weight,))
    (ew,) = torch.autograd.grad(ns["Net"].forward.__wrapped__(net, x, v)[0].sum(), (net.conv.weight,))
    assert torch.equal(gw, ew)
    text = str(ppy_magic.explain(net.forward))
    assert "calls as region: 4; fallbacks to Python: 0" in text and "break" not in text, text
    line = next(ln for ln in text.splitlines() if "compiled from torch's own source" in ln)
    for name, file in [
        ("nn.Conv3d.forward", "conv"),
        ("nn.Conv3d._conv_forward", "conv"),
        ("nn.AvgPool2d.forward", "pooling"),
        ("nn.MaxPool2d.forward", "pooling"),
        ("nn.Upsample.forward", "upsampling"),
        ("nn.PixelShuffle.forward", "pixelshuffle"),
        ("nn.Hardshrink.forward", "activation"),
        ("nn.Unflatten.forward", "flatten"),
        ("nn.Sequential.forward", "container"),
        ("nn._BatchNorm.forward", "batchnorm"),
        ("nn.BatchNorm1d._check_input_dim", "batchnorm"),
        ("nn.RMSNorm.forward", "normalization"),
        ("nn.ConvTranspose2d.forward", "conv"),
    ]:
        assert f"{name} (torch/nn/modules/{file}.py:" in line, (name, line)
