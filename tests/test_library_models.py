"""Unmodified models of public libraries compiled with ``ppy_magic.compile(model)``: exact and whole.

Each model of ``tests/support/library_models.py`` (GPT-2, Llama, BERT, ViT, Mixtral, diffusers' UNet2DModel,
an x-transformers decoder, and more: T5, BART, Qwen2, GPT-NeoX, Phi, Qwen2-MoE, a conditional UNet, a VAE,
an x-transformers encoder) is built tiny from a config with a fixed seed, deep-copied as its eager twin, and
compiled. Then, each compared with the twin bit for bit at every one of several calls:

- its outputs in eval mode (no_grad), in train mode with dropout (the RNG seeded alike on both sides, its
  state after compared), and every parameter's gradient after a backward, in eval and in train mode;
- the library's classes untouched (``vars(cls)`` of every class in every submodule's MRO, by identity),
  ``compile`` returning the model itself, the names of its state, parameters, buffers and submodules;
- ``copy.deepcopy``, ``pickle`` and ``torch.save`` of the compiled model: the copy computes what eager does,
  and is bound to itself (changing the original's weights leaves the copy's results alone);
- ``load_state_dict`` after compiling, forward hooks registered after compiling (they fire, and one that
  returns a new output changes the result as in eager), a ``train()``/``eval()`` switch.

The share of Python calls a compiled forward still makes (over eager's) is printed and recorded as the
test's ``python_call_share`` property. The harness itself is checked too: with ``compile_fn`` the identity
every check passes on every model, and compile functions that are wrong by one ulp, on a later call only,
in the gradient only, in the RNG only, or that change a class, are caught.

``PPY_LIBRARY_MODELS_COMPILE=identity`` runs the whole suite with the identity for ``compile`` (the harness
against itself).
"""

from __future__ import annotations

import copy
import io
import os
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch
from torch import nn

import ppy_magic
from tests.support import library_models as L

IDENTITY_ENV = os.environ.get("PPY_LIBRARY_MODELS_COMPILE") == "identity"
# The models first asked for; the others check generality. Each model's first calls build its C++ (20-70 s on
# 2 cores), which takes the file past ten minutes from a cold cache: those others are marked slow
# (``-m "not slow"`` leaves them out). The harness's own tests are fast on every model.
CORE = ("gpt2", "gpt2-sdpa", "llama", "bert", "vit", "mixtral", "unet2d", "x-decoder")
ENTRIES = [pytest.param(e, id=e.name, marks=() if e.name in CORE else pytest.mark.slow) for e in L.MODELS]
EVERY = [pytest.param(e, id=e.name) for e in L.MODELS]
# Each model's tests run together on one pytest-xdist worker (tests/conftest.py): the file is a third of
# the suite.
XDIST_SPREAD = "entry"


def identity(model: nn.Module) -> nn.Module:
    return model


@pytest.fixture
def compile_fn() -> Callable[[nn.Module], Any]:
    return identity if IDENTITY_ENV else ppy_magic.compile


def _same(got: Any, want: Any, where: str) -> None:
    diff = L.output_difference(got, want)
    assert diff is None, f"{where}: {diff}"


def _eval(model: nn.Module, args: tuple, kwargs: dict, seed: int = 0) -> Any:
    return L.call(model, args, kwargs, train=False, grad=False, seed=seed)[0]


def _train(model: nn.Module, args: tuple, kwargs: dict, seed: int = 0) -> Any:
    return L.call(model, args, kwargs, train=True, grad=False, seed=seed)[0]


def _settle(model: nn.Module, args: tuple, kwargs: dict, calls: int = 3) -> None:
    """A few calls in each mode, so that what the compiled model builds at its calls has landed."""
    for i in range(calls):
        _eval(model, args, kwargs, seed=i)
        _train(model, args, kwargs, seed=i)
    ppy_magic.wait()
    model.eval()


def _same_in_both_modes(model: nn.Module, eager: nn.Module, args: tuple, kwargs: dict, what: str) -> None:
    for i in range(2):
        _same(_eval(model, args, kwargs, seed=i), _eval(eager, args, kwargs, seed=i), f"{what}, eval call {i + 1}")
        _same(_train(model, args, kwargs, seed=i), _train(eager, args, kwargs, seed=i), f"{what}, train call {i + 1}")
    model.eval()
    eager.eval()


# ----------------------------------------------------------------------------------------------------------
# exactness


@pytest.mark.parametrize("mode", L.MODES)
@pytest.mark.parametrize("entry", ENTRIES)
def test_exact(entry: L.LibraryModel, mode: str, compile_fn) -> None:
    L.check_exact(entry, compile_fn, modes=(mode,))


# ``generate`` is checked on a causal LM, a mixture of experts and an encoder-decoder here; on every model of the
# suite (and of the sweep) that generates, by ``benchmarks.library_sweep``.
GENERATE = ("gpt2", "mixtral", "t5")


@pytest.mark.parametrize("entry", [L.entry(name) for name in GENERATE], ids=GENERATE)
def test_generate(entry: L.LibraryModel, compile_fn) -> None:
    """``model.generate`` on the compiled model, as a user calls it, bit for bit eager's
    (``library_models.generate_differences``); the compiled model still makes fewer Python calls."""
    compiled, eager, _, _ = L.pair(entry, compile_fn)
    assert L.generates(compiled)
    found = L.generate_differences(entry, compiled, eager)
    assert not found, f"{entry.name}: " + "; ".join(found)
    if compile_fn is not identity:
        args, _ = entry.inputs()
        with L._foreground():
            calls = [
                L.count_python_calls(lambda m=m: m.generate(args[0], max_new_tokens=4, pad_token_id=0))
                for m in (compiled, eager)
            ]
        assert calls[0] < calls[1], f"generate made {calls[0]} Python calls compiled, {calls[1]} eager"


# ----------------------------------------------------------------------------------------------------------
# the model stays the library's model


@pytest.mark.parametrize("entry", ENTRIES)
def test_classes_unchanged(entry: L.LibraryModel, compile_fn) -> None:
    model, args, kwargs = entry.build()
    snapshot = L.snapshot_classes(model)
    compiled = compile_fn(model)
    assert not L.changed_classes(snapshot), "compile changed the library's classes"
    _settle(compiled, args, kwargs)
    L.scalar_of(L.call(compiled, args, kwargs, train=True, grad=True, seed=0)[0]).backward()
    changed = L.changed_classes(snapshot)
    assert not changed, "calls of the compiled model changed the library's classes:\n  " + "\n  ".join(changed[:20])


@pytest.mark.parametrize("entry", ENTRIES)
def test_compile_returns_the_model(entry: L.LibraryModel, compile_fn) -> None:
    model, _, _ = entry.build()
    assert compile_fn(model) is model


def _names(model: nn.Module) -> dict[str, list]:
    return {
        "state_dict": list(model.state_dict()),
        "named_parameters": [n for n, _ in model.named_parameters()],
        "named_buffers": [n for n, _ in model.named_buffers()],
        "named_modules": [n for n, _ in model.named_modules()],
        "parameter objects": [id(p) for p in model.parameters()],
    }


@pytest.mark.parametrize("entry", ENTRIES)
def test_names_unchanged(entry: L.LibraryModel, compile_fn) -> None:
    model, args, kwargs = entry.build()
    before = _names(model)
    compiled = compile_fn(model)
    assert _names(compiled) == before
    _settle(compiled, args, kwargs)
    assert _names(compiled) == before, "after its calls"


@pytest.mark.parametrize("entry", ENTRIES)
def test_load_state_dict_after_compiling(entry: L.LibraryModel, compile_fn) -> None:
    compiled, eager, args, kwargs = L.pair(entry, compile_fn)
    _settle(compiled, args, kwargs)
    other, _, _ = entry.build(seed=1)
    compiled.load_state_dict(other.state_dict())
    _same_in_both_modes(compiled, other, args, kwargs, "weights loaded after compiling")


# ----------------------------------------------------------------------------------------------------------
# copies


def _perturb(model: nn.Module) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)


@pytest.mark.parametrize("entry", ENTRIES)
def test_deepcopy(entry: L.LibraryModel, compile_fn) -> None:
    compiled, eager, args, kwargs = L.pair(entry, compile_fn)
    _settle(compiled, args, kwargs)
    twin = copy.deepcopy(compiled)
    _same_in_both_modes(twin, eager, args, kwargs, "the deep copy")
    # Each copy computes with its own weights: the original's change reaches neither the copy nor eager.
    _perturb(compiled)
    _same_in_both_modes(twin, eager, args, kwargs, "the deep copy, the original's weights changed")
    changed = copy.deepcopy(eager)
    _perturb(changed)
    _same_in_both_modes(compiled, changed, args, kwargs, "the original, its weights changed after the copy")


def _round_trip(how: str, model: nn.Module) -> nn.Module:
    if how == "pickle":
        return pickle.loads(pickle.dumps(model))
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize("when", ["before its calls", "after its calls"])
@pytest.mark.parametrize("how", ["pickle", "torch.save"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_saved_and_loaded(entry: L.LibraryModel, how: str, when: str, compile_fn) -> None:
    compiled, eager, args, kwargs = L.pair(entry, compile_fn)
    if when == "after its calls":  # some models install hooks at their first call (transformers' output capture)
        _settle(compiled, args, kwargs)
        _settle(eager, args, kwargs)
    try:
        _round_trip(how, copy.deepcopy(eager))
    except Exception as err:  # noqa: BLE001 - then the compiled model must fail the same way
        with pytest.raises(type(err)):
            _round_trip(how, compiled)
        return
    loaded = _round_trip(how, compiled)
    _same_in_both_modes(loaded, eager, args, kwargs, f"loaded back ({how})")
    _perturb(compiled)
    _same_in_both_modes(loaded, eager, args, kwargs, f"loaded back ({how}), the original's weights changed")


# ----------------------------------------------------------------------------------------------------------
# hooks and modes


def _hook_targets(model: nn.Module, args: tuple, kwargs: dict) -> list[str]:
    """Submodules eager calls in one eval forward: the first leaf with parameters, and the first block
    (an item of the first ModuleList, else the first submodule with submodules of its own)."""
    probe = copy.deepcopy(model)
    fired: list[str] = []
    names = {m: n for n, m in probe.named_modules()}
    handles = [
        m.register_forward_hook(lambda mod, i, o: fired.append(names[mod])) for n, m in probe.named_modules() if n
    ]
    _eval(probe, args, kwargs)
    for h in handles:
        h.remove()
    modules = dict(probe.named_modules())
    leaf = next(
        (n for n in fired if not list(modules[n].children()) and list(modules[n].parameters(recurse=False))), None
    )
    lists = [n for n, m in probe.named_modules() if isinstance(m, nn.ModuleList) and len(m)]
    block = next((n for n in fired if lists and n == f"{lists[0]}.0"), None)
    block = block or next((n for n in fired if list(modules[n].children())), None)
    return [n for n in (leaf, block) if n is not None]


@pytest.mark.parametrize("entry", ENTRIES)
def test_forward_hook_after_compiling(entry: L.LibraryModel, compile_fn) -> None:
    compiled, eager, args, kwargs = L.pair(entry, compile_fn)
    _settle(compiled, args, kwargs)
    plain = _eval(eager, args, kwargs)
    targets = _hook_targets(eager, args, kwargs)
    assert targets, "no submodule to hook"
    for name in targets:
        seen: dict[str, list] = {}
        outs = {}
        for side, model in (("compiled", compiled), ("eager", eager)):
            calls: list = []
            handle = model.get_submodule(name).register_forward_hook(lambda mod, i, o, calls=calls: calls.append(o))
            outs[side] = _eval(model, args, kwargs)
            handle.remove()
            seen[side] = calls
        assert len(seen["compiled"]) == len(seen["eager"]) > 0, (
            f"the hook on {name} fired {len(seen['compiled'])} times"
        )
        _same(seen["compiled"], seen["eager"], f"what the hook on {name} saw")
        _same(outs["compiled"], outs["eager"], f"the output with a hook on {name}")
        _same(_eval(compiled, args, kwargs), plain, f"the output after the hook on {name} was removed")

        def double(mod: nn.Module, i: Any, o: Any) -> Any:
            return o * 2 if isinstance(o, torch.Tensor) else (o[0] * 2, *o[1:]) if isinstance(o, tuple) else None

        changed = {}
        for side, model in (("compiled", compiled), ("eager", eager)):
            handle = model.get_submodule(name).register_forward_hook(double)
            changed[side] = _eval(model, args, kwargs)
            handle.remove()
        _same(changed["compiled"], changed["eager"], f"the output with a hook on {name} returning a new output")
        assert L.output_difference(changed["eager"], plain) is not None, f"the hook on {name} changed nothing"
        _same(_eval(compiled, args, kwargs), plain, f"the output after the second hook on {name} was removed")


@pytest.mark.parametrize("entry", ENTRIES)
def test_train_eval_switch(entry: L.LibraryModel, compile_fn) -> None:
    compiled, eager, args, kwargs = L.pair(entry, compile_fn)
    outs: dict[str, list] = {"compiled": [], "eager": []}
    steps = [(False, 1), (True, 1), (True, 2), (False, 2), (True, 1), (False, 1)]
    for side, model in (("compiled", compiled), ("eager", eager)):
        for train, seed in steps:
            outs[side].append(L.call(model, args, kwargs, train=train, grad=False, seed=seed)[0])
    for i, (train, seed) in enumerate(steps):
        _same(outs["compiled"][i], outs["eager"][i], f"step {i + 1} ({'train' if train else 'eval'}, seed {seed})")
    # what eager shows, the compiled model shows too: dropout in train mode only
    evals = [o for o, (train, _) in zip(outs["compiled"], steps, strict=True) if not train]
    for other in evals[1:] if not entry.random_in_eval else ():
        _same(other, evals[0], "eval calls with other seeds")
    if entry.dropout:
        assert L.output_difference(outs["compiled"][1], outs["compiled"][0]) is not None, "train mode = eval mode"
        assert L.output_difference(outs["compiled"][1], outs["compiled"][2]) is not None, "dropout ignored the seed"


# ----------------------------------------------------------------------------------------------------------
# Python calls


@pytest.mark.parametrize("entry", ENTRIES)
def test_python_calls_left(entry: L.LibraryModel, record_property, compile_fn) -> None:
    """The Python calls of one settled eval forward of the compiled model, over eager's (printed, and
    recorded as the test's ``python_call_share`` property): fewer, or nothing was compiled."""
    compiled, eager, _, _ = L.pair(entry, compile_fn)
    args, kwargs = entry.eval_inputs()
    share = L.python_call_share(compiled, args, kwargs, eager=eager)
    record_property("python_call_share", round(share.share, 4))
    record_property("python_calls", f"{share.compiled}/{share.eager}")
    print(f"\n{entry.name}: Python calls of one eval forward, compiled / eager: {share}")
    if compile_fn is not identity:
        assert share.compiled < share.eager, f"as many Python calls as eager (nothing compiled?): {share}"


# ----------------------------------------------------------------------------------------------------------
# the harness checked against itself


@pytest.mark.parametrize("entry", EVERY)
def test_harness_passes_for_identity(entry: L.LibraryModel) -> None:
    """With compile the identity, every check passes on every model: the harness compares like with like."""
    L.check_exact(entry, identity)
    model, args, kwargs = entry.build()
    snapshot = L.snapshot_classes(model)
    _settle(model, args, kwargs)
    assert not L.changed_classes(snapshot)
    share = L.python_call_share(model, *entry.eval_inputs(), eager=copy.deepcopy(model))
    assert share.compiled == share.eager > 0


@pytest.mark.parametrize("entry", EVERY)
def test_train_mode_draws_from_the_rng(entry: L.LibraryModel) -> None:
    """The train-mode check means something: each model's train outputs depend on the seed, and eval's do
    not, but for a model that samples in eval mode too (the VAE's posterior)."""
    model, args, kwargs = entry.build()
    assert entry.dropout or entry.random_in_eval, "nothing random in train mode"
    assert L.output_difference(_train(model, args, kwargs, seed=1), _train(model, args, kwargs, seed=2))
    evals = L.output_difference(_eval(model, args, kwargs, seed=1), _eval(model, args, kwargs, seed=2))
    assert (evals is not None) == entry.random_in_eval


def _ulp_up(t: torch.Tensor) -> torch.Tensor:
    return torch.nextafter(t, torch.tensor(float("inf")))


def _first_ulp_up(out: Any) -> Any:
    """The output with its first floating tensor one ulp up (autograd still reaches the parameters)."""
    if isinstance(out, torch.Tensor):
        return out + (_ulp_up(out.detach()) - out.detach())
    if isinstance(out, Mapping):  # a ModelOutput
        for key, value in out.items():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                out[key] = _first_ulp_up(value)
                return out
    raise TypeError(type(out))


def one_ulp(model: nn.Module) -> nn.Module:
    """Every element of the first parameter one ulp up."""
    p = next(model.parameters())
    with torch.no_grad():
        p.copy_(_ulp_up(p))
    return model


def forward_one_ulp_off(model: nn.Module) -> nn.Module:
    """The instance's forward swapped for one whose first output is one ulp up."""
    forward = model.forward

    def wrong(*args: Any, **kwargs: Any) -> Any:
        return _first_ulp_up(forward(*args, **kwargs))

    model.forward = wrong
    return model


def wrong_from_call_2(model: nn.Module) -> nn.Module:
    forward, calls = model.forward, [0]

    def wrong(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        out = forward(*args, **kwargs)
        return out if calls[0] == 1 else _first_ulp_up(out)

    model.forward = wrong
    return model


def wrong_gradient(model: nn.Module) -> nn.Module:
    p = next(model.parameters())
    p.register_hook(lambda g: g * (1 + 2**-10))
    return model


def extra_draw_in_train(model: nn.Module) -> nn.Module:
    def draw(mod: nn.Module, args: tuple) -> None:
        if mod.training:
            torch.rand(1)

    model.register_forward_pre_hook(draw)
    return model


# wrong compile function -> the modes that must catch it
WRONG = {
    one_ulp: ("eval", "train", "grad"),
    forward_one_ulp_off: ("eval", "train", "grad"),
    wrong_from_call_2: ("eval", "train", "grad"),
    wrong_gradient: ("grad",),
    extra_draw_in_train: ("train", "grad"),
}


@pytest.mark.parametrize("wrong", list(WRONG), ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", ["gpt2", "unet2d", "x-decoder"])
def test_harness_catches_a_wrong_result(name: str, wrong: Callable) -> None:
    entry = L.entry(name)
    for mode in L.MODES:
        found = L.differences(entry, wrong, modes=(mode,))
        if mode in WRONG[wrong]:
            assert found, f"{wrong.__name__} passed the {mode} check"
        else:
            assert not found, f"{wrong.__name__} failed the {mode} check, which it should pass: {found}"
    with pytest.raises(AssertionError, match="not the same as eager"):
        L.check_exact(entry, wrong)


@pytest.mark.parametrize("wrong", [one_ulp, wrong_from_call_2], ids=lambda f: f.__name__)
def test_harness_catches_a_wrong_generation(wrong: Callable) -> None:
    """The generate check compares every step's scores bit for bit (and the identity passes it)."""
    entry = L.entry("gpt2")
    assert not L.generate_differences(entry, *L.pair(entry, identity)[:2])
    assert L.generate_differences(entry, *L.pair(entry, wrong)[:2])


def test_harness_catches_a_changed_class() -> None:
    model, args, kwargs = L.entry("gpt2").build()
    snapshot = L.snapshot_classes(model)
    block = type(model.transformer.h[0])
    forward = block.forward
    try:
        block.forward = lambda self, *a, **k: forward(self, *a, **k)
        assert L.changed_classes(snapshot) == [f"{block.__module__}.{block.__qualname__}.forward was replaced"]
    finally:
        block.forward = forward
    assert not L.changed_classes(snapshot)
    model.transformer.h[0].__class__ = type("Sub", (block,), {})
    assert any("submodule transformer.h.0" in c for c in L.changed_classes(snapshot))


def test_harness_counts_python_calls() -> None:
    def f(n: int) -> int:
        return n if n < 1 else f(n - 1)

    assert L.count_python_calls(lambda: f(4)) == 5
    assert L.count_python_calls(lambda: torch.ones(3).sum()) == 0
