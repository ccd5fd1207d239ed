"""``ppy_magic.compile``: code nobody decorated (tests/support/library_code.py, an importable module),
compiled from its source. The model is the same object, its classes untouched, other instances eager;
results, dropout and gradients bit for bit eager's at every call; copies, pickles, hooks and modes behave."""

from __future__ import annotations

import copy
import io
import pickle
import types

import pytest
import torch
from torch import nn

import ppy_magic
from ppy_magic import variants
from tests.support import library_code as lib


def _model(seed: int = 0) -> lib.Model:
    torch.manual_seed(seed)
    return lib.Model(lib.Config())


def _same(a, b) -> bool:
    if isinstance(a, lib.Output):
        return type(b) is lib.Output and _same(a.last_hidden_state, b.last_hidden_state) and _same(a.aux, b.aux)
    return isinstance(a, torch.Tensor) and torch.equal(a, b) and a.dtype == b.dtype


def _class_state() -> dict:
    return {cls: dict(vars(cls)) for cls in (lib.Model, lib.Block, lib.MLP, lib.RMSNorm)}


@pytest.fixture(scope="module")
def compiled():
    """A compiled model, its eager twin and an input, after the model settled (builds in the foreground)."""
    before = _class_state()
    model, eager = _model(), _model()
    x = torch.randn(2, 5, 16)
    assert ppy_magic.compile(model) is model
    model.eval(), eager.eval()
    with variants.blocking(), torch.no_grad():
        for _ in range(4):
            assert _same(model(x), eager(x))
    return model, eager, x, before


def test_the_classes_are_untouched_and_other_instances_stay_eager(compiled):
    model, eager, _x, before = compiled
    assert _class_state() == before  # every attribute of every class the same object
    assert type(model) is lib.Model and type(model.blocks[0]) is lib.Block
    assert "forward" not in eager.__dict__ and "forward" not in eager.blocks[0].__dict__
    assert isinstance(model.forward, types.MethodType) and model.forward.__self__ is model
    assert model.forward.__func__ is not lib.Model.forward


def test_submodules_run_inline_in_their_callers_region(compiled):
    model, _eager, x, _ = compiled
    blocks = model.blocks[0].forward.__func__  # the decorator's wrapper, calling the region
    with variants.blocking(), torch.no_grad():
        model(x)
    top = ppy_magic.library.compiled_methods(model)["forward"].region
    assert top.__ppy_region__, ppy_magic.explain(top)
    # A block's forward is wrapped by a decorator with code of its own: it runs as Python around its region.
    assert blocks is not lib.Block.forward and blocks.__wrapped__ is not lib.Block.forward.__wrapped__
    # The MLP's forward (a decorator that returns it) and RMSNorm's run inline in the block's region.
    mlp = ppy_magic.library.compiled_methods(model.blocks[0].mlp)["forward"]
    assert mlp.wrapped_by == () and mlp.region.calls == 0


def _settled_twin(cls: type) -> tuple:
    """A compiled `cls()`, its eager copy and an input, after three calls compared bit for bit."""
    torch.manual_seed(0)
    model = cls()
    eager = copy.deepcopy(model)
    ppy_magic.compile(model)
    x = torch.randn(3, 16)
    with variants.blocking(), torch.no_grad():
        for _ in range(3):
            assert torch.equal(model(x), eager(x))
    return model, eager, x


def test_a_decorators_wrapper_compiles_inline_with_the_function_its_closure_holds():
    """`doubled` and `shifted` are wrapped by one decorator (the same wrapper code, two closures), Doubler's
    forward by it too, Shifter's by one written as transformers' deprecate_kwarg is (an enum of actions, the
    class's name, keywords tested by name): the caller's region runs each wrapper's code (decided when
    compiling: no renamed keyword is passed) and the function its own closure holds, so each gives its own
    result; the instances' own bindings are never called, and called on their own still rename and warn."""
    model, eager, x = _settled_twin(lib.TwoWrapped)
    top = ppy_magic.library.compiled_methods(model)["forward"].region
    assert top.__ppy_region__ and top.__dict__.get("__ppy_split__") is None, ppy_magic.explain(top)
    for sub in (model.twice, model.lift):
        done = ppy_magic.library.compiled_methods(sub)["forward"]
        assert done.wrapped_by and done.region.calls == 0, ppy_magic.explain(model)
    with variants.blocking(), torch.no_grad():  # called on their own, the wrappers still rename as they did
        assert torch.equal(model.twice(inp=x), eager.twice(inp=x))
        with pytest.warns(FutureWarning, match="`value` is deprecated for Shifter.forward"):
            assert torch.equal(model.lift(value=x), eager.lift(value=x))


def test_a_partial_each_instance_makes_is_the_value_its_region_was_built_for_when_it_binds_the_same():
    """Each PartialAct holds its own functools.partial: two bind softmax's dim=-1, one dim=0. The two alike
    share a region's variant (no fallback at their calls); the third is not taken for them (its own variant)."""
    model, eager, x = _settled_twin(lib.PartialStack)
    (region,) = {ppy_magic.library.compiled_methods(m)["forward"].region for m in model.layers}
    calls, fallbacks = region.calls, region.fallbacks
    with torch.no_grad():
        for _ in range(3):
            for layer, twin in zip(model.layers, eager.layers, strict=True):
                assert torch.equal(layer(x), twin(x))
    assert (region.calls, region.fallbacks) == (calls + 9, fallbacks), ppy_magic.explain(region)


def test_eval_train_and_gradients_are_eagers_bit_for_bit():
    model, eager = _model(), _model()
    ppy_magic.compile(model)
    x = torch.randn(2, 5, 16, requires_grad=True)
    mask = torch.ones(2, 5, 1)
    with variants.blocking():
        for call in range(4):
            for train in (False, True):
                model.train(train), eager.train(train)
                xs = [x.detach().clone().requires_grad_() for _ in range(2)]
                torch.manual_seed(call)
                got = model(xs[0], mask=mask)
                torch.manual_seed(call)
                want = eager(xs[1], mask=mask)
                assert _same(got, want), (call, train)
                (got.last_hidden_state.sum() + got.aux.sum()).backward()
                (want.last_hidden_state.sum() + want.aux.sum()).backward()
                assert torch.equal(xs[0].grad, xs[1].grad)
                for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters(), strict=True):
                    assert torch.equal(p.grad, q.grad), name
                model.zero_grad(), eager.zero_grad()


def test_keywords_into_kwargs_pass_through(compiled):
    model, eager, x, _ = compiled
    with variants.blocking(), torch.no_grad():
        for _ in range(3):
            assert _same(model(x, extra=torch.ones(1)), eager(x, extra=torch.ones(1)))
            # the decorator's own code still runs: it renames `hidden` before the region sees the call
            assert _same(model.blocks[0](hidden=x), eager.blocks[0](hidden=x))
    # the blocks run inline in the model's region, through their wrapper: its variant takes the keyword
    top = ppy_magic.library.compiled_methods(model)["forward"].region
    records = [
        r for p in [top, *getattr(top, "__ppy_parts__", ())] for r in p.__dict__.get("__ppy_variant_records__", ())
    ]
    assert any("extra" in " ".join(r.specialised) for r in records), [str(r) for r in records]


def test_explain_is_a_tree_of_submodules(compiled):
    model, _eager, x, _ = compiled
    with variants.blocking(), torch.no_grad():
        model.blocks[0](x)  # called on its own, through its decorator's wrapper (inline in the model's region)
    text = str(ppy_magic.explain(model))
    assert text.splitlines()[0] == "Model: compiled with ppy_magic.compile"
    assert "(the model) (Model): forward: region with " in text, text  # the dict on the instance, the output...
    assert "blocks.0.norm (RMSNorm): forward: never called on its own: inline in its caller's region" in text
    assert "  blocks.0 (Block):" in text and "    blocks.0.mlp (MLP):" in text
    assert "blocks.0.mlp.up (Linear): torch.nn" in text
    assert "renames_kwarg.<locals>.wrapper.<locals>.wrapped" in text  # the wrapper that still runs


def test_state_dict_copies_pickles_and_hooks_behave(compiled):
    model, eager, x, _ = compiled
    assert list(model.state_dict()) == list(eager.state_dict())
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in eager.named_parameters()]
    twin = copy.deepcopy(model)
    assert twin.forward.__self__ is twin and twin.blocks[1].forward.__self__ is twin.blocks[1]
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    restored = pickle.loads(pickle.dumps(model))
    seen = []
    handle = model.blocks[1].register_forward_hook(lambda m, a, out: seen.append(out.shape))
    with variants.blocking(), torch.no_grad():
        for _ in range(3):
            want = eager(x)
            for other in (twin, loaded, restored):
                assert _same(other(x), want)
            assert _same(model(x), want)
    handle.remove()
    assert seen == [torch.Size([2, 5, 16])] * 3


def test_a_submodule_hooked_for_good_runs_as_python_and_the_rest_stays_in_regions():
    """A forward hook registered on a submodule a region calls inline (as transformers' output capture does,
    for good): the first calls run as Python (a debugging hook may go again); once it stays, the block is
    split around the call, which runs through nn.Module.__call__, hook and all, while the rest of the block
    runs as regions that no longer fall back."""
    model, eager = _model(), _model()
    ppy_magic.compile(model)
    seen: dict[int, list] = {id(model): [], id(eager): []}

    def doubling(into: list):
        def hook(module, args, out):
            into.append(out.shape)
            return out * 2

        return hook

    for m in (model, eager):
        m.blocks[0].mlp.register_forward_hook(doubling(seen[id(m)]))
    model.eval(), eager.eval()
    x = torch.randn(2, 5, 16)
    block = ppy_magic.library.compiled_methods(model.blocks[0])["forward"].region
    with variants.blocking(), torch.no_grad():
        for _ in range(variants.HOOKED_CALLS + 2):
            assert _same(model(x), eager(x))
        calls, fallbacks = ppy_magic.region.counters(block)
        for _ in range(3):
            assert _same(model(x), eager(x))
    assert len(seen[id(model)]) == len(seen[id(eager)]) == variants.HOOKED_CALLS + 5
    now, again = ppy_magic.region.counters(block)
    assert again == fallbacks and now >= calls + 3, ppy_magic.explain(block)
    text = str(ppy_magic.explain(block))
    assert "self.mlp has a forward hook registered: nn.Module.__call__ runs it" in text, text


def test_a_function_a_method_and_a_class_compile():
    f = ppy_magic.compile(lib.gelu_tanh)
    assert f is not lib.gelu_tanh and lib.gelu_tanh.__name__ == "gelu_tanh"
    x = torch.randn(8, 32)
    with variants.blocking():
        for _ in range(2):
            assert torch.equal(f(x), lib.gelu_tanh(x))
    assert f.__ppy_region__
    norm = lib.RMSNorm(32)
    bound = ppy_magic.compile(norm.forward)
    with variants.blocking():
        for _ in range(2):
            assert torch.equal(bound(x), lib.RMSNorm.forward(norm, x))

    class Local(torch.nn.Module):
        def forward(self, x):
            return lib.scale_by(x) + 1

    assert ppy_magic.compile(Local) is Local
    with variants.blocking():
        for _ in range(2):
            assert torch.equal(Local()(x), x * 2.0 + 1)
    assert Local.forward.__ppy_region__


def test_a_list_argument_handed_back_through_a_submodule_is_the_callers_own_list():
    torch.manual_seed(0)
    block, eager = lib.StateBlock(), lib.StateBlock()
    eager.load_state_dict(block.state_dict())
    ppy_magic.compile(block)
    x = torch.randn(3, 8)
    with variants.blocking(), torch.no_grad():
        for _ in range(4):
            state, want_state = [torch.zeros(3, 8)], [torch.zeros(3, 8)]
            got, want = block(x, state), eager(x, want_state)
            assert type(got) is tuple and torch.equal(got[0], want[0])
            assert got[1] is state and want[1] is want_state  # the same list, not a tuple or a copy
            assert torch.equal(state[0], want_state[0])  # and written as eager writes it


def test_bad_input_says_what_to_do():
    with pytest.raises(TypeError, match="takes an nn.Module, a class or a function"):
        ppy_magic.compile(3)
    with pytest.raises(ValueError, match="level"):
        ppy_magic.compile(lib.gelu_tanh, level=7)
    with pytest.raises(TypeError, match="not builtin_function_or_method"):
        ppy_magic.compile(len)

    def numbers():
        yield 1

    with pytest.raises(ppy_magic.CompileError, match="numbers cannot be compiled: it is a generator"):
        ppy_magic.compile(numbers)


def test_ppy_bench_times_a_compiled_model_against_its_own_python(compiled):
    """%ppy_bench model x: the region row is the compiled model, the eager row the same model as its classes
    run it (a twin without the instance's bindings), both bit for bit the same."""
    from ppy_magic.bench import measure as bench

    model, _eager, x, _ = compiled
    twin = bench.pure_python_module(model)
    assert "forward" not in twin.__dict__ and "forward" not in twin.blocks[0].__dict__
    assert bench.region_of(model) is ppy_magic.library.compiled_methods(model)["forward"].region
    options = bench.BenchOptions(number=20, repeat=2, warmup=5, compile=False)
    with variants.blocking(), torch.no_grad():
        result = bench.measure(model, [x], options, arg_names=["x"])
    assert result[bench.REGION].matches_eager and result[bench.EAGER].ran
    assert result.region_calls and result.region_calls > 0


@pytest.mark.parametrize("keep", [0, 1, 3])
def test_forms_library_code_uses_compile(keep):
    """slice(...) as an index, isinstance decided when compiling, a tuple display of a run-time shape."""
    f, g = ppy_magic.compile(lib.keep_last), ppy_magic.compile(lib.split_heads)
    x = torch.randn(2, 5, 8)
    with variants.blocking():
        for _ in range(2):
            assert torch.equal(f(x, keep), lib.keep_last(x, keep))
            assert torch.equal(g(x, 2), lib.split_heads(x, 2))
    assert f.__ppy_region__ and g.__ppy_region__
    assert not f.__dict__.get("__ppy_split__") and not g.__dict__.get("__ppy_split__")  # whole, no breaks


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_generate_with_a_cache_is_eagers(name):
    """transformers' generate() on a compiled model (a KV cache updated between calls, positions moving):
    the same tokens as eager's at every generation."""
    pytest.importorskip("transformers")
    from tests.support import library_models as L

    model, args, _kwargs = L.entry(name).build()
    eager = copy.deepcopy(model)
    ppy_magic.compile(model)
    with variants.blocking():
        for _ in range(3):
            got = model.generate(args[0], max_new_tokens=6, do_sample=False, pad_token_id=0)
            want = eager.generate(args[0], max_new_tokens=6, do_sample=False, pad_token_id=0)
            assert torch.equal(got, want)


def test_a_library_exception_class_is_raised_by_the_region_as_in_python():
    f = ppy_magic.compile(lib.checked_scale)
    x = torch.randn(3, 4)
    with variants.blocking():
        for _ in range(2):
            assert torch.equal(f(x, 2), lib.checked_scale(x, 2))
    assert f.__ppy_region__ and "__ppy_split__" not in f.__dict__, ppy_magic.explain(f)
    for args, cls in (((torch.randn(3), 2), lib.ShapeError), ((x, -1), lib.Errors.Nested)):
        with pytest.raises(cls) as want:
            lib.checked_scale(*args)
        with pytest.raises(cls) as got:
            f(*args)
        assert type(got.value) is cls and str(got.value) == str(want.value)
    assert ppy_magic.explain(f).fallbacks == 0


@pytest.mark.parametrize("norm", [True, False])
def test_a_helper_returning_a_wrapped_nested_function_compiles_into_the_callers_region(norm):
    torch.manual_seed(0)
    model = lib.MaybeNorm(16, norm)
    eager = copy.deepcopy(model)
    ppy_magic.compile(model)
    x = torch.randn(3, 16)
    with variants.blocking():
        for _ in range(3):
            assert torch.equal(model(x), eager(x))
    reg = model.forward.__func__
    assert reg.__ppy_region__ and "__ppy_split__" not in reg.__dict__, ppy_magic.explain(model.forward)
    assert ppy_magic.explain(model.forward).fallbacks == 0


def test_a_plain_objects_property_compiles_inline_and_a_replaced_one_is_seen():
    """`self.config.mode`, a property of a plain config: its getter compiles into the forward's region (no
    break, no fallback); a class whose property is replaced afterwards gets what Python gets."""
    torch.manual_seed(0)
    model, eager = lib.ModeSwitch(lib.NamedConfig()), lib.ModeSwitch(lib.NamedConfig())
    eager.load_state_dict(model.state_dict())
    ppy_magic.compile(model)
    x = torch.randn(2, 5, 16)
    region = ppy_magic.library.compiled_methods(model)["forward"].region
    with variants.blocking(), torch.no_grad():
        for _ in range(3):
            assert torch.equal(model(x), eager(x))
        calls, fallbacks = ppy_magic.region.counters(region)
        text = str(ppy_magic.explain(region))
        assert calls >= 2 and fallbacks == 0 and "break" not in text, text
        for mode in ("shift", "offset", "offset"):
            for config in (model.config, eager.config):
                config._mode = mode
            assert torch.equal(model(x), eager(x))
        original = lib.NamedConfig.mode
        try:
            lib.NamedConfig.mode = property(lambda self: "scale")
            for _ in range(2):
                assert torch.equal(model(x), eager(x))
                assert torch.equal(model(x), eager.proj(x) * 2.0)
        finally:
            lib.NamedConfig.mode = original
        assert torch.equal(model(x), eager(x))
        # a getter a region cannot take: read in Python before its statement, the rest stays in regions
        offset, twin = lib.ModeSwitch(lib.NamedConfig("offset")), lib.ModeSwitch(lib.NamedConfig("offset"))
        twin.load_state_dict(offset.state_dict())
        ppy_magic.compile(offset)
        for _ in range(2):
            assert torch.equal(offset(x), twin(x))
    text = str(ppy_magic.explain(ppy_magic.library.compiled_methods(offset)["forward"].region))
    assert "read in Python just before line" in text and ": self.config.offset" in text, text


def test_a_config_whose_class_decides_its_reads_is_read_as_python_reads_it():
    """A class's own __getattribute__ (transformers' configs remap names and raise for per-layer fields) is
    not what the region's reads from the instance would give: such a read is Python's, value and error."""
    torch.manual_seed(0)
    model = lib.Remapped(lib.RemappedConfig(factor=2.0, scale=3.0, shift=0.5))
    eager = lib.Remapped(lib.RemappedConfig(factor=2.0, scale=3.0, shift=0.5))
    eager.load_state_dict(model.state_dict())
    ppy_magic.compile(model)
    x = torch.randn(2, 5, 16)
    with variants.blocking(), torch.no_grad():
        for _ in range(3):
            assert torch.equal(model(x), eager(x))  # factor reads `scale` (3.0), not the stored 2.0
            assert torch.equal(model(x), eager.proj(x) * 3.0 + 0.5)
        model.config.__dict__["layered"] = eager.config.__dict__["layered"] = True
        for m in (model, eager):
            with pytest.raises(lib.LayeredFieldError, match="'factor' is a per-layer field"):
                m(x)
    text = str(ppy_magic.explain(ppy_magic.library.compiled_methods(model)["forward"].region))
    assert "read in Python just before line" in text and "self.config.factor" in text, text


def test_a_module_class_with_its_own_getattr_is_read_as_python_reads_it():
    """A module class with a __getattr__ of its own (diffusers' models answer config fields from it, before
    nn.Module's): its forward compiles, each submodule checked when compiling to be what Python's read gives;
    where its __getattr__ answers a submodule's name with something else, the read is Python's (and so is
    the error)."""
    model, _, x = _settled_twin(lib.Answered)
    region = ppy_magic.library.compiled_methods(model)["forward"].region
    assert region.__ppy_region__ and "break" not in str(ppy_magic.explain(region)), str(ppy_magic.explain(region))
    shadowed = ppy_magic.compile(lib.Answered(proj=3.0))  # its __getattr__ answers `proj` with the config's 3.0
    for m in (shadowed, lib.Answered(proj=3.0)):
        with variants.blocking(), pytest.raises(TypeError, match="'float' object is not callable"):
            m(x)


def test_a_class_whose_base_has_only_a_wrapped_classmethod_compiles():
    """A base class is found in its file through the function its decorators wrap (a classmethod under
    ``torch.no_grad()``, whose wrapper's code is torch's): its subclasses' forwards compile."""
    model, _, _ = _settled_twin(lib.FromLegacy)
    region = ppy_magic.library.compiled_methods(model)["forward"].region
    assert region.__ppy_region__, str(ppy_magic.explain(region))


def test_getattr_with_a_default_reads_the_attribute_or_compiles_the_default_while_it_stays_absent():
    """``getattr(obj, "name", default)``: where the call's object has the attribute, it is read as ``obj.name``;
    where it has none, the default is compiled in and the object's layout checks at each call that it still
    has none (in its __dict__, its class, a module's submodules): one that gains it runs as Python does."""

    class Config:
        def __init__(self, **fields):
            self.__dict__.update(fields)

    torch.manual_seed(0)
    model, eager = lib.Defaults(Config(scale=2.0)), lib.Defaults(Config(scale=2.0))
    eager.load_state_dict(model.state_dict())
    ppy_magic.compile(model)
    x = torch.randn(2, 5, 16)

    def same() -> None:
        with variants.blocking(), torch.no_grad():
            for _ in range(2):
                assert torch.equal(model(x), eager(x))

    same()
    region = ppy_magic.library.compiled_methods(model)["forward"].region
    assert region.__ppy_region__ and "break" not in str(ppy_magic.explain(region))
    calls = region.calls
    same()
    assert region.calls == calls + 2  # the region ran
    for m in (model, eager):  # the instance gains the fields
        m.config.use_shift, m.config.shift = True, 0.5
    same()
    assert torch.equal(model(x), eager.proj(x) * 2.0 + 0.5)
    Config.scale = 5.0  # the class gains one (the instance's own still wins)
    del model.config.scale, eager.config.scale
    same()
    assert torch.equal(model(x), eager.proj(x) * 5.0 + 0.5)
    torch.manual_seed(1)
    model.extra = nn.Linear(16, 16)  # a submodule the default was None for
    eager.extra = copy.deepcopy(model.extra)
    same()


@pytest.mark.parametrize(
    "name, args",
    [
        ("layer_norm", lambda x: (x, (16,), torch.ones(16) * 2, torch.zeros(16) + 0.5)),
        ("softmax", lambda x: (x, -1)),
        ("normalize", lambda x: (x,)),
        ("rms_norm", lambda x: (x, (16,))),
        ("embedding", lambda x: (torch.tensor([[0, 3], [2, 1]]), x)),
    ],
)
def test_torchs_own_functional_source_compiles_whole_and_a_subclass_still_runs_python(name, args):
    """torch.nn.functional's Python functions ask `has_torch_function_*` before their ops: inside a region
    that is False (its guard sent subclasses and overrides to the Python body), so the function is one
    region from torch's source; a tensor subclass passed in still runs torch's Python, override and all."""
    fn = getattr(torch.nn.functional, name)
    f = ppy_magic.compile(fn)
    x = torch.randn(5, 16)
    with variants.blocking():
        for _ in range(3):
            assert _same(f(*args(x)), fn(*args(x)))
    text = str(ppy_magic.explain(f))
    assert f.__ppy_region__ and "break" not in text and "fallbacks to Python: 0" in text, text

    class Seen(torch.Tensor):
        calls = 0

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.calls += 1
            return super().__torch_function__(func, types, args, kwargs or {})

    sub = args(x.as_subclass(Seen))
    got = f(*sub)
    assert Seen.calls > 0 and type(got) is Seen and torch.equal(got, fn(*args(x)))


def test_is_scripting_and_layout_flags_compile_as_python_answers_them():
    f = ppy_magic.compile(lib.doubled_unless_scripting)
    x = torch.randn(3, 4)
    with variants.blocking():
        for _ in range(2):
            assert torch.equal(f(x), x * 2)
    text = str(ppy_magic.explain(f))
    assert f.__ppy_region__ and "break" not in text and "fallbacks to Python: 0" in text, text
