"""nn.Module methods as regions: models compiled as they are written, compared with eager bit for bit.

The same source runs twice: compiled (the ``%%ppy`` way) and as plain Python, so the
eager twin of each model has the same classes, the same initialisation and the same
random numbers. Outputs, gradients, running statistics and the parameters after
AdamW steps must be bitwise equal, in train and in eval mode, and the compiled models
must have run as regions (no fallback). Calls a region was not built for (hooks,
subclasses, other kinds of attribute) must run the Python method, with the reason.

This file costs two builds (the GPT cell and the nets cell), plus a few cells that
refuse before building.
"""

from __future__ import annotations

import copy
import inspect
import io
import pickle
import sys
import types

import pytest
import torch
from torch import nn

import ppy_magic
from tests.support.cells import assert_same, compile_cell
from tests.support.nanogpt import GPT_SOURCE

NETS_SOURCE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
import ppy


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes),
            )

    @ppy.opt(3)
    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        out = F.relu(out) * self.expansion  # a class constant
        return out


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 16))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, stride=2), BasicBlock(32, 32))
        self.linear = nn.Linear(32, num_classes)

    @ppy.opt(3)
    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        out = self.linear(out)
        return out


class LSTMCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.ih = nn.Linear(input_size, 4 * hidden_size)
        self.hh = nn.Linear(hidden_size, 4 * hidden_size)

    @ppy.opt(3)
    def forward(self, input, hx, cx):
        gates = self.ih(input) + self.hh(hx)
        ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)

        ingate = torch.sigmoid(ingate)
        forgetgate = torch.sigmoid(forgetgate)
        cellgate = torch.tanh(cellgate)
        outgate = torch.sigmoid(outgate)

        cy = (forgetgate * cx) + (ingate * cellgate)
        hy = outgate * torch.tanh(cy)
        return hy, cy


class Zoo(nn.Module):
    """Every restated torch.nn module, each read per call."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.bil = nn.Bilinear(8, 8, 4)
        self.ln = nn.LayerNorm(8)
        self.rms = nn.RMSNorm(8)
        self.gn = nn.GroupNorm(2, 8)
        self.bn = nn.BatchNorm1d(8, momentum=None)
        self.emb = nn.Embedding(10, 8, padding_idx=0)
        self.drop = nn.Dropout(0.25)
        self.conv1 = nn.Conv1d(8, 8, 3, padding=1, padding_mode="reflect")
        self.conv2 = nn.Conv2d(2, 4, 3, padding=1)
        self.deconv = nn.ConvTranspose2d(4, 2, 2, stride=2)
        self.acts = nn.ModuleList([
            nn.ReLU(), nn.GELU(), nn.SiLU(), nn.Tanh(), nn.Sigmoid(), nn.LeakyReLU(0.2), nn.ELU(),
            nn.Mish(), nn.Hardtanh(-2.0, 2.0), nn.ReLU6(), nn.Hardswish(), nn.Hardsigmoid(), nn.SELU(),
            nn.Softplus(), nn.Softsign(), nn.Tanhshrink(), nn.Softmax(dim=-1), nn.LogSoftmax(dim=1),
        ])
        self.flat = nn.Flatten()
        self.ident = nn.Identity()
        self.seq = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 2)})
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.gates = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

    @ppy.opt(3)
    def forward(self, x, tokens, img):
        h = self.lin(x) + self.emb(tokens).sum(1)
        h = self.ln(h) + self.rms(h)
        h = self.gn(h) + self.bn(h)
        h = self.drop(h)
        h = self.conv1(h.unsqueeze(-1).expand(-1, -1, 4)).mean(-1)
        for act in self.acts:
            h = act(h)
        for blk in self.blocks:
            h = blk(h)
        # Lists of modules known at the call, counted and zipped (zip stops at the shorter), as model code writes them
        for i, blk in enumerate(self.blocks, 1):
            h = h + blk(h) * (0.5 / i)
        for k, (blk, gate) in enumerate(zip(self.blocks, self.gates)):
            h = blk(h) * torch.sigmoid(gate(h)) + k
        # ... and modules known from __init__: unrolled
        for k, (act, layer) in enumerate(zip(self.acts, reversed(self.seq))):
            h = act(layer(h)) + k
        h = h + self.blocks[0](h) + self.blocks[-1](h) + self.blocks[len(self.blocks) - 1](h)
        b = self.bil(h, h)
        y = self.deconv(self.conv2(img))
        h = h * (len(self.acts) / 18) + self.seq[0](h) + self.seq[-1](h)
        return self.seq(self.ident(h)) + self.heads["a"](h).sum() + self.heads.b(h).sum(), b, self.flat(y)


class Net(nn.Module):
    """A small net for hooks, subclasses and replaced attributes."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)
        self.scale = 0.5

    @ppy.opt(3)
    def forward(self, x):
        """Two layers, scaled."""
        return self.fc2(torch.relu(self.fc1(x))) * self.scale


class Counter:
    """A method of a plain class: the instance's attributes, read per call."""

    def __init__(self, step: float):
        self.step = step

    @ppy.opt(3)
    def advance(self, x):
        return x + self.step
'''


def load(source: str, name: str):
    """`source` compiled as a cell in module `name`, and run as plain Python in `name`_eager."""
    compiled = types.ModuleType(name)
    sys.modules[name] = compiled  # dataclasses and pickle look classes up by module
    _ns, report = compile_cell(source, compiled.__dict__, filename=f"<{name}>")
    eager = types.ModuleType(name + "_eager")
    sys.modules[eager.__name__] = eager
    exec(compile(source, f"<{name}-eager>", "exec"), eager.__dict__)
    return compiled, eager, report


@pytest.fixture(scope="module")
def gpt():
    compiled, eager, report = load(GPT_SOURCE, "ppy_test_gpt")
    names = ("LayerNorm.forward", "CausalSelfAttention.forward", "MLP.forward", "Block.forward", "GPT.forward")
    assert set(report.compiled) == set(names), report.summary()
    return compiled, eager


@pytest.fixture(scope="module")
def nets():
    compiled, eager, report = load(NETS_SOURCE, "ppy_test_nets")
    assert not report.python, report.summary()
    return compiled, eager


def twins(modules, cls: str, *args, **kwargs):
    """The compiled and the eager model, initialised from the same seed."""
    compiled, eager = modules
    torch.manual_seed(0)
    r = getattr(compiled, cls)(*args, **kwargs)
    torch.manual_seed(0)
    e = getattr(eager, cls)(*args, **kwargs)
    return r, e


def region_of(model) -> object:
    f = type(model).__dict__.get("forward")
    assert getattr(f, "__ppy_region__", False), f"{type(model).__name__}.forward is not a region"
    return f


def assert_grads(r: nn.Module, e: nn.Module) -> None:
    for (name, p), q in zip(r.named_parameters(), e.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            assert torch.equal(p.grad, q.grad), name


def assert_state(r: nn.Module, e: nn.Module) -> None:
    rs, es = r.state_dict(), e.state_dict()
    assert list(rs) == list(es)
    for k in rs:
        assert torch.equal(rs[k], es[k]), k


def train_steps(r, e, batch, loss_of, steps: int = 3) -> None:
    """AdamW steps on both twins, seeding the RNG identically (dropout): every step equal."""
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (r, e)]
    for step in range(steps):
        outs = []
        for m, opt in zip((r, e), opts, strict=True):
            opt.zero_grad()
            torch.manual_seed(100 + step)
            out = m(*batch)
            loss_of(out).backward()
            outs.append(out)
        assert_same(outs[0], outs[1])
        assert_grads(r, e)
        for opt in opts:
            opt.step()
        assert_state(r, e)


# ---- the contract -------------------------------------------------------------------------------


def test_a_method_is_a_region_that_binds_like_a_function(nets):
    compiled, eager = nets
    Net = compiled.Net
    f = Net.__dict__["forward"]
    assert f.__ppy_region__ is True
    assert f.__wrapped__.__code__.co_name == "forward"
    assert (f.__name__, f.__qualname__, f.__doc__) == ("forward", "Net.forward", "Two layers, scaled.")
    assert inspect.signature(f) == inspect.signature(eager.Net.forward)
    r, e = twins(nets, "Net")
    assert inspect.signature(r.forward) == inspect.signature(e.forward)
    x = torch.randn(5, 4)
    calls = f.calls
    assert_same(r.forward(x), e.forward(x))  # the bound method
    assert_same(r(x), e(x))  # nn.Module.__call__
    assert_same(Net.forward(r, x), e(x))  # through the class
    assert f.calls == calls + 3 and f.fallbacks == 0
    explained = str(ppy_magic.explain(Net.forward))
    assert "ATen region" in explained
    assert "Linear (exact class; no hooks; forward not replaced): weight, bias" in explained


def test_a_method_of_a_plain_class(nets):
    compiled, eager = nets
    c, d = compiled.Counter(0.25), eager.Counter(0.25)
    x = torch.randn(3)
    assert_same(c.advance(x), d.advance(x))
    c.step = d.step = 1.5  # read per call
    assert_same(c.advance(x), d.advance(x))
    assert compiled.Counter.advance.calls == 2


# ---- models as public code writes them ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_nanogpt_logits_gradients_and_adamw_steps(gpt, mode):
    compiled, eager = gpt
    r, e = twins(gpt, "GPT", compiled.GPTConfig())
    getattr(r, mode)()
    getattr(e, mode)()
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 50, (2, 8), generator=g)
    targets = torch.randint(0, 50, (2, 8), generator=g)
    regions = [region_of(m) for m in (r, r.transformer.h[0], r.transformer.h[0].attn)]
    before = [(f.calls, f.fallbacks) for f in regions]
    train_steps(r, e, (idx, targets), lambda out: out[1])
    torch.manual_seed(7)
    logits_r, none_r = r(idx)
    torch.manual_seed(7)
    logits_e, none_e = e(idx)
    assert none_r is None and none_e is None
    assert_same(logits_r, logits_e)
    after = [(f.calls, f.fallbacks) for f in regions]
    assert after[0] == (before[0][0] + 4, before[0][1]), "GPT.forward ran as Python"
    assert after[1:] == before[1:], "the blocks ran through Python, not inline"


def test_nanogpt_assert_is_the_same_error(gpt):
    compiled, eager = gpt
    r, e = twins(gpt, "GPT", compiled.GPTConfig())
    idx = torch.zeros(1, 17, dtype=torch.long)
    with pytest.raises(AssertionError, match="Cannot forward sequence of length 17, block size is only 16"):
        r(idx)
    with pytest.raises(AssertionError, match="Cannot forward sequence of length 17, block size is only 16"):
        e(idx)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_resnet_with_batchnorm_running_stats(nets, mode):
    r, e = twins(nets, "ResNet")
    getattr(r, mode)()
    getattr(e, mode)()
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    y = torch.randint(0, 10, (4,), generator=torch.Generator().manual_seed(3))
    f = region_of(r)
    calls = f.calls
    train_steps(r, e, (x,), lambda out: nn.functional.cross_entropy(out, y))
    assert f.calls == calls + 3 and f.fallbacks == 0
    assert_state(r, e)  # running_mean, running_var, num_batches_tracked
    if mode == "train":
        assert int(r.layer2[0].shortcut[1].num_batches_tracked) == 3
    r.eval()
    e.eval()
    assert_same(r(x), e(x))


def test_lstm_cell_over_a_sequence(nets):
    r, e = twins(nets, "LSTMCell", 4, 6)
    g = torch.Generator().manual_seed(4)
    xs = torch.randn(5, 3, 4, generator=g)

    def run(cell):
        h = c = torch.zeros(3, 6)
        outs = []
        for x in xs:
            h, c = cell(x, h, c)
            outs.append(h)
        return torch.stack(outs)

    out_r, out_e = run(r), run(e)
    assert_same(out_r, out_e)
    out_r.square().sum().backward()
    out_e.square().sum().backward()
    assert_grads(r, e)
    assert region_of(r).calls >= 5 and region_of(r).fallbacks == 0
    # and one step at a time, through three AdamW steps
    h, c = torch.randn(3, 6, generator=g), torch.randn(3, 6, generator=g)
    train_steps(r, e, (xs[0], h, c), lambda out: out[0].sum() + out[1].square().sum())


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_every_restated_module(nets, mode):
    r, e = twins(nets, "Zoo")
    getattr(r, mode)()
    getattr(e, mode)()
    g = torch.Generator().manual_seed(5)
    args = (
        torch.randn(4, 8, generator=g),
        torch.randint(0, 10, (4, 3), generator=g),
        torch.randn(4, 2, 5, 5, generator=g),
    )
    f = region_of(r)
    calls = f.calls
    train_steps(r, e, args, lambda out: out[0].sum() + out[1].sum() + out[2].sum(), steps=2)
    assert f.calls == calls + 2 and f.fallbacks == 0, f.last_fallback_reason
    assert_state(r, e)  # BatchNorm1d with momentum=None: a cumulative average


# ---- attributes are read per call --------------------------------------------------------------------


def test_replaced_parameters_load_state_dict_dtype_and_mode(nets):
    r, e = twins(nets, "Net")
    x = torch.randn(5, 4)
    f = region_of(r)
    calls = f.calls
    with torch.no_grad():
        w = torch.randn(8, 4)
    r.fc1.weight = nn.Parameter(w.clone())
    e.fc1.weight = nn.Parameter(w.clone())
    assert_same(r(x), e(x))
    r.fc2.bias = None
    e.fc2.bias = None
    assert_same(r(x), e(x))
    state = {k: torch.randn_like(v) for k, v in e.state_dict().items()}
    r.load_state_dict(state)
    e.load_state_dict(state)
    assert_same(r(x), e(x))
    r.scale = e.scale = 2.5
    assert_same(r(x), e(x))
    r.double()
    e.double()
    assert_same(r(x.double()), e(x.double()))
    assert f.calls == calls + 5 and f.fallbacks == 0, f.last_fallback_reason


def test_an_attribute_of_another_kind_runs_the_python_method(nets):
    r, e = twins(nets, "Net")
    x = torch.randn(2, 4)
    f = region_of(r)
    r.scale = e.scale = 2  # an int: the region was compiled for a float
    assert_same(r(x), e(x))
    assert f.last_fallback_reason == "self.scale is an int; the region was compiled for a float"
    r.scale = e.scale = 0.5
    r.fc2 = nn.Identity()
    e.fc2 = nn.Identity()
    assert_same(r(x), e(x))
    assert f.last_fallback_reason == "self.fc2 is a Identity; the region was compiled for a Linear"


def test_a_subclass_instance_runs_the_python_method(nets):
    compiled, eager = nets

    class Wider(compiled.Net):
        pass

    class WiderEager(eager.Net):
        pass

    torch.manual_seed(0)
    r = Wider()
    torch.manual_seed(0)
    e = WiderEager()
    f = region_of(compiled.Net())
    fallbacks = f.fallbacks
    x = torch.randn(2, 4)
    assert_same(r(x), e(x))
    assert f.fallbacks == fallbacks + 1
    assert "a subclass of Net" in f.last_fallback_reason
    assert "Wider" in str(ppy_magic.explain(compiled.Net.forward))


def test_hooks_on_inlined_submodules(nets):
    r, e = twins(nets, "Net")
    f = region_of(r)
    x = torch.randn(3, 4)

    def double(module, args, output):
        return output * 2

    def shift(module, args):
        return (args[0] + 1,)

    for hook in ("forward", "pre"):
        handles = [
            m.fc1.register_forward_hook(double) if hook == "forward" else m.fc1.register_forward_pre_hook(shift)
            for m in (r, e)
        ]
        fallbacks = f.fallbacks
        assert_same(r(x), e(x))
        assert f.fallbacks == fallbacks + 1
        assert f.last_fallback_reason.startswith("self.fc1 has a forward")
        for h in handles:
            h.remove()
        calls = f.calls
        assert_same(r(x), e(x))
        assert f.calls == calls + 1  # a region again
    # a hook on the model itself: nn.Module.__call__ runs it, then the region
    handles = [m.register_forward_hook(double) for m in (r, e)]
    calls = f.calls
    assert_same(r(x), e(x))
    assert f.calls == calls + 1
    for h in handles:
        h.remove()
    # a global hook runs for every module, the inlined ones too
    seen = []
    handle = nn.modules.module.register_module_forward_hook(lambda m, a, o: seen.append(type(m).__name__))
    try:
        fallbacks = f.fallbacks
        assert_same(r(x), e(x))
        assert f.fallbacks == fallbacks + 1 and "global module hook" in f.last_fallback_reason
        assert seen.count("Linear") == 4  # both twins ran fc1 and fc2 through __call__
    finally:
        handle.remove()


def test_parametrizations_and_weight_norm(nets):
    r, e = twins(nets, "Net")
    x = torch.randn(3, 4)
    f = region_of(r)
    for m in (r, e):
        nn.utils.parametrizations.orthogonal(m.fc1)
    fallbacks = f.fallbacks
    assert_same(r(x), e(x))
    assert f.fallbacks == fallbacks + 1 and "ParametrizedLinear" in f.last_fallback_reason


def test_state_dict_deepcopy_pickle_and_torch_save(nets):
    compiled, eager = nets
    r, e = twins(nets, "Net")
    x = torch.randn(3, 4)
    assert_state(r, e)
    f = region_of(r)
    for other in (
        copy.deepcopy(r),
        pickle.loads(pickle.dumps(r)),
        torch.load(_saved(r), weights_only=False),
    ):
        assert type(other) is compiled.Net
        calls = f.calls
        assert_same(other(x), e(x))
        assert f.calls == calls + 1
        assert_state(other, e)


def _saved(model) -> io.BytesIO:
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    return buf


# ---- what stays Python, and why ---------------------------------------------------------------------


REFUSED = """
import torch
import torch.nn as nn
import ppy


class Unannotated(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    @ppy.opt(3)
    def forward(self, x):
        return x.view(x.shape[0], self.heads, -1)


class Assigns(nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0

    @ppy.opt(3)
    def forward(self, x):
        self.last = x
        return x


class Annotated(nn.Module):
    heads: int

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    @ppy.opt(3)
    def forward(self, x):
        return x.view(x.shape[0], self.heads, -1)


class Backwards(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])

    @ppy.opt(3)
    def forward(self, x):
        for layer in reversed(self.layers):
            x = layer(x)
        return x
"""


def test_what_a_method_cannot_read_is_located():
    compiled, eager, report = load(REFUSED, "ppy_test_refused")
    reasons = dict(report.python)
    assert "the kind of `self.heads` is not known before the cell runs" in reasons["Unannotated.forward"]
    assert reasons["Unannotated.forward"].startswith("at 14:35: ")  # `self.heads` in the return
    assert "assigning to an attribute" in reasons["Assigns.forward"]
    assert report.compiled == ["Annotated.forward"]
    loop = REFUSED.splitlines().index("        for layer in reversed(self.layers):") + 1
    assert reasons["Backwards.forward"].startswith(f"at {loop}:22: ")  # at `reversed(self.layers)`
    assert "reversed(), zip() or enumerate() of self.layers is not supported here" in reasons["Backwards.forward"]
    assert "write `for m in self.layers:`" in reasons["Backwards.forward"]
    x = torch.randn(2, 6)
    assert_same(compiled.Unannotated(3)(x), eager.Unannotated(3)(x))
    assert_same(compiled.Annotated(3)(x), eager.Annotated(3)(x))
    assert compiled.Annotated.forward.calls == 1


# ---- %ppy_bench model x ---------------------------------------------------------------------------------


def test_bench_times_a_model_as_region_eager_and_compiled(nets):
    from ppy_magic.bench import measure as bench

    r, _e = twins(nets, "Net")
    x = torch.randn(5, 4)
    f = region_of(r)
    compiled_with = []

    def fake_compile(model):
        compiled_with.append(model)
        return model

    options = bench.BenchOptions(number=10, repeat=2, warmup=3)
    result = bench.measure(r, (x,), options, arg_names=["x"], compile_fn=fake_compile)
    assert result.function == "Net"
    assert result[bench.REGION].matches_eager and result[bench.REGION].ran
    assert result[bench.EAGER].ran and result[bench.COMPILE].ran
    # only the region row called the region: once to check, then warm-up and rounds
    assert (result.region_calls, result.region_fallbacks) == (1 + 3 + 2 * 10, 0)
    twin = compiled_with[0]
    assert type(twin).__name__ == "Net" and type(twin) is not type(r) and isinstance(twin, type(r))
    assert type(twin).forward is f.__wrapped__  # the Python body
    assert twin.fc1.weight is r.fc1.weight  # the same parameters


def test_bench_magic_takes_a_model(ip, nets):
    r, _e = twins(nets, "Net")
    ip.user_ns["bench_model"], ip.user_ns["bench_x"] = r, torch.randn(5, 4)
    out = ip.run_line_magic("ppy_bench", "-n 5 -r 2 --no-compile -q -o bench_model bench_x")
    df = out.df
    assert bool(df.loc["PPy ATen region", "matches_eager"])
    assert out.result.region_calls > 0 and out.result.region_fallbacks == 0


def test_bench_checks_a_model_with_dropout_on_the_same_random_numbers(nets):
    from ppy_magic.bench import measure as bench

    r, _e = twins(nets, "Zoo")
    r.train()
    g = torch.Generator().manual_seed(5)
    args = (
        torch.randn(4, 8, generator=g),
        torch.randint(0, 10, (4, 3), generator=g),
        torch.randn(4, 2, 5, 5, generator=g),
    )
    options = bench.BenchOptions(number=2, repeat=1, warmup=0, compile=False)
    result = bench.measure(r, args, options)
    assert result[bench.REGION].matches_eager, result[bench.REGION].check


def test_a_replaced_class_method_runs_python(nets):
    """The region inlines the forward it compiled: a class whose method was replaced runs Python."""
    r, e = twins(nets, "Net")
    x = torch.randn(3, 4)
    f = region_of(r)
    original = nn.Linear.forward

    def doubled(self, input):
        return original(self, input) * 2

    nn.Linear.forward = doubled
    try:
        fallbacks = f.fallbacks
        assert_same(r(x), e(x))
        assert f.fallbacks == fallbacks + 1 and "Linear whose forward is not" in f.last_fallback_reason
    finally:
        nn.Linear.forward = original
    calls = f.calls
    assert_same(r(x), e(x))
    assert f.calls == calls + 1


EARLIER = """
import torch
import torch.nn as nn
import ppy


class Scale(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d))
        self.shift = 0.5

    @ppy.opt(3)
    def forward(self, x):
        return self.twice(x) * self.w + self.shift

    @ppy.opt(3)
    def twice(self, x):
        return x * 2
"""

LATER = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = Scale(4)
        self.fc = nn.Linear(4, 4)

    @ppy.opt(3)
    def forward(self, x):
        return self.fc(self.s(x))
"""


def test_a_class_of_an_earlier_cell_runs_inline_and_its_methods_are_checked():
    module = types.ModuleType("ppy_test_cells")
    sys.modules[module.__name__] = module
    compile_cell(EARLIER, module.__dict__, filename="<earlier>")
    _ns, report = compile_cell(LATER, module.__dict__, filename="<later>")
    assert report.compiled == ["Model.forward"], report.summary()
    torch.manual_seed(0)
    m = module.Model()
    x = torch.randn(2, 4)
    f = module.Model.__dict__["forward"]
    inner = (module.Scale.forward.calls, module.Scale.twice.calls)
    expected = m.fc((x * 2) * m.s.w + 0.5)
    assert_same(m(x), expected)
    assert (f.calls, f.fallbacks) == (1, 0) and (module.Scale.forward.calls, module.Scale.twice.calls) == inner
    m.s.twice = lambda x: x  # on the instance
    assert_same(m(x), m.fc(x * m.s.w + 0.5))
    assert f.last_fallback_reason == "self.s.twice is set on the instance, over the compiled method"
    del m.s.twice
    twice = module.Scale.twice
    module.Scale.twice = lambda self, x: x * 3  # on the class
    try:
        assert_same(m(x), m.fc((x * 3) * m.s.w + 0.5))
        assert f.last_fallback_reason == (
            "self.s is a Scale whose twice is not the method compiled into the region (it was replaced)"
        )
    finally:
        module.Scale.twice = twice
    assert_same(m(x), expected)
    assert f.calls == 2
