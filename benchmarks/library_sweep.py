"""``ppy_magic.compile`` on library models the test suite does not name: is each bit for bit eager's?

The tests check the models of ``tests/support/library_models.py``; this sweep runs the same checks on
``tests/support/more_library_models.py`` (104 models: Mistral, Gemma 1-3, Qwen3, OPT, GPT-J, Falcon, BLOOM,
Phi-3, Cohere, OLMo-2, GPT-Neo, MPT, CTRL, XLNet, RWKV, RecurrentGemma, OLMoE, DeepSeek-V3, gpt-oss,
Llama 4, JetMoE, PhiMoE, Mamba, RoBERTa, DeBERTa-v2, Longformer, BigBird, ModernBERT, Funnel, mBART,
Pegasus, LED, Switch Transformers, DINOv2, BEiT, ResNet, Swin v1-2, SegFormer, MobileViT, wav2vec2,
HuBERT, CLIP's text model, diffusers' DiT, PixArt, Prior, ControlNet, VQ, SD3 and Flux transformers,
x-transformers' wrappers and its decoder's options, ...), to find what a model outside that list meets
first.
Per model: eval under no_grad, train mode with dropout (the RNG seeded alike, its state compared after),
and every parameter's gradient in both modes, over 3 calls each (``library_models.differences``); for a
model that generates, ``generate`` greedy (tokens and scores) and sampled (``generate_differences``); the
library's classes unchanged; and the Python calls of one eval forward, compiled over eager.

    python -m benchmarks.library_sweep [--models mistral,deit]

Exits 1 when a model differs from eager, changes its library's classes, or ``compile`` raises.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.support import library_models as L
from tests.support import more_library_models as M


def check(entry: L.LibraryModel) -> tuple[bool | None, str]:
    """(exact, or None where the model cannot be built here; what to print) for one model."""
    try:
        entry.build()
    except Exception as err:  # noqa: BLE001 - a config this library version does not take is not ours
        return None, f"not built here ({type(err).__name__}: {str(err).splitlines()[0][:120]})"
    t0 = time.perf_counter()
    try:
        pair = L.pair(entry)
        classes = L.snapshot_classes(pair[0])
        found = L.differences(entry, pair_=pair)
        if L.generates(pair[0]):
            found += L.generate_differences(entry, *pair[:2])
        found += L.changed_classes(classes)
        share = L.python_call_share(pair[0], *entry.eval_inputs(), eager=pair[1])
    except Exception as err:  # noqa: BLE001 - the report names it
        return False, f"RAISED {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    took = f"{time.perf_counter() - t0:.0f} s"
    if found:
        return False, "DIFFERS: " + "; ".join(found[:3]) + f" ({took})"
    generated = ", generate" if L.generates(pair[0]) else ""
    return True, f"bit for bit (eval, train, grads{generated}), classes unchanged; {share} ({took})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help=f"comma-separated names (default: all of {', '.join(M.BY_NAME)})")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",")] if args.models else list(M.BY_NAME)
    unknown = [n for n in names if n not in M.BY_NAME]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(M.BY_NAME)}")
    outcomes = []
    for name in names:
        ok, what = check(M.BY_NAME[name])
        outcomes.append(ok)
        print(f"{name:14} {what}", flush=True)
    built = [ok for ok in outcomes if ok is not None]
    print(f"\n{sum(built)} of {len(built)} models exact ({len(outcomes) - len(built)} not built here)")
    return 0 if all(built) else 1


if __name__ == "__main__":
    sys.exit(main())
