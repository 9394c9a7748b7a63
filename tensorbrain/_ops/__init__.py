"""Differentiable ops. One op = one function: its forward computes the output array with ``xp``
(NumPy or CuPy) and attaches a ``backward`` closure right beside it (see ``core.make``)."""
