"""The decorator namespace: ``import ppy`` then ``@ppy.opt(3)``.

In plain Python (``python file.ppy``) the decorator only marks functions; ``ppy
file.ppy`` and ``%%ppy`` cells compile them into ATen regions.
"""

from ppy_magic.decorator import opt

__all__ = ["opt"]
