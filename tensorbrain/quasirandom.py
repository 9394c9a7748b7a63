"""``tb.quasirandom`` (``torch.quasirandom``): :class:`SobolEngine`, low-discrepancy Sobol'
sequences, drawn with SciPy's ``scipy.stats.qmc.Sobol`` (the same Joe-Kuo direction numbers as
torch, so an unscrambled engine gives torch's points; a scrambled one is scrambled by SciPy's
generator, so a seed does not give torch's points).
"""
from __future__ import annotations


class SobolEngine:
    """A Sobol' sequence generator (torch's ``torch.quasirandom.SobolEngine``).

    Args:
        dimension: the dimension of the points, 1 to 21201.
        scramble: apply Owen scrambling (SciPy's) to the sequence.
        seed: the scrambling seed.

    Raises:
        ValueError: a dimension outside the supported range, as torch's.
        ModuleNotFoundError: SciPy is not installed (``pip install scipy``).

    Example:
        >>> import tensorbrain as tb
        >>> tb.quasirandom.SobolEngine(2).draw(3).tolist()
        [[0.0, 0.0], [0.5, 0.5], [0.75, 0.25]]
    """

    MAXBIT = 30
    MAXDIM = 21201

    def __init__(self, dimension: int, scramble: bool = False, seed: int | None = None) -> None:
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError(f"Supported range of dimensionality for SobolEngine is "
                             f"[1, {self.MAXDIM}]")
        try:
            from scipy.stats import qmc
        except ImportError as exc:
            raise ModuleNotFoundError("tb.quasirandom.SobolEngine draws with SciPy "
                                      "(scipy.stats.qmc.Sobol): pip install scipy") from exc
        self.dimension, self.scramble, self.seed = dimension, scramble, seed
        self._engine = qmc.Sobol(dimension, scramble=scramble, seed=seed)
        self.num_generated = 0

    def _out(self, points, out, dtype):
        import tensorbrain as tb
        t = tb.tensor(points, dtype=dtype if dtype is not None else tb.get_default_dtype())
        if out is not None:
            out.resize_as_(t).copy_(t)
            return out
        return t

    def draw(self, n: int = 1, out=None, dtype=None):
        """The next ``n`` points, ``(n, dimension)``.

        Args:
            n: how many.
            out: a tensor to write them to.
            dtype: the dtype (default: the default dtype).
        """
        import warnings
        with warnings.catch_warnings():   # SciPy warns on counts that are not powers of 2
            warnings.simplefilter("ignore", UserWarning)
            points = self._engine.random(n)
        self.num_generated += n
        return self._out(points, out, dtype)

    def draw_base2(self, m: int, out=None, dtype=None):
        """The next ``2 ** m`` points, keeping the sequence's balance properties.

        Args:
            m: the base-2 exponent.
            out: a tensor to write them to.
            dtype: the dtype.

        Raises:
            ValueError: the total drawn would not be a power of 2, or too many points (torch's).
        """
        n = 2 ** m
        total = self.num_generated + n
        if total & (total - 1):
            raise ValueError(f"The balance properties of Sobol' points require n to be a power "
                             f"of 2. {self.num_generated} points have been previously generated, "
                             f"then: n={self.num_generated}+2**{m}={total}. If you still want to "
                             f"do this, please use 'SobolEngine.draw()' instead.")
        return self.draw(n, out, dtype)

    def reset(self) -> SobolEngine:
        """Start the sequence again."""
        self._engine.reset()
        self.num_generated = 0
        return self

    def fast_forward(self, n: int) -> SobolEngine:
        """Skip the next ``n`` points.

        Args:
            n: how many.
        """
        self._engine.fast_forward(n)
        self.num_generated += n
        return self

    def __repr__(self) -> str:
        fmt = [f"dimension={self.dimension}"]
        if self.scramble:
            fmt += ["scramble=True"]
        if self.seed is not None:
            fmt += [f"seed={self.seed}"]
        return f"{type(self).__name__}({', '.join(fmt)})"


__all__ = ["SobolEngine"]
