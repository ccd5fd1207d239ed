"""What the tests and the benchmarks share: compiling cells, and comparing regions with eager.

- ``cells``: compile a source like a ``%%ppy`` cell, the front end's error for a source, ``assert_same``.
- ``source``: values written as Python source, the parameters and text of a generated function.
- ``outcomes``: a generated case, its outcome (match, stayed Python, mismatch, ...) and their summaries.
- ``eager``: one case called as a region and as its Python body; what differs; eager asked again.
- ``batch``: many cases compiled in chunks (one C++ build each) and compared.
- ``opinfo``: PyTorch's OpInfo samples as generated functions, and the coverage table.
- ``fuzz``: random straight-line programs over the op table (hypothesis).
- ``functional_probes``: a call of every public function of ``torch.nn.functional`` (and ``torch.functional``).
- ``processes``: what the tests' subprocesses run (a wrapper script for this interpreter).

"Same as eager" itself is ``ppy_magic.bench.compare.same_as_eager``: one rule for the tests and ``%ppy_bench``.
The benchmarks import this package from the repository root (``python -m benchmarks.fuzz``).
"""
