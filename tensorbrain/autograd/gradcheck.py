"""``torch.autograd.gradcheck``: a function's backward against central finite differences.

The check programs run on their own custom :class:`~tensorbrain.autograd.Function` (torch's
"Extending PyTorch" recipe ends with it). The project's own op tests use the richer
:func:`tensorbrain.testing.gradcheck`, which also compares with NumPy and torch.

>>> import tensorbrain as tb
>>> x = tb.randn(3, dtype=tb.float64, requires_grad=True)
>>> tb.autograd.gradcheck(lambda t: (t * t.exp()).sum(), (x,))
True
"""
from __future__ import annotations

import warnings

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module, to_numpy
from ._backward import grad as autograd_grad
from .grad_mode import enable_grad, no_grad

__all__ = ["GradcheckError", "gradcheck"]


class GradcheckError(RuntimeError):
    """The analytic and numerical Jacobians differ (torch's ``GradcheckError``)."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _is_float(t):
    return isinstance(t, Tensor) and np.dtype(t._data.dtype).kind == "f"


def _outputs(func, inputs):
    """The floating-point Tensor outputs (integer outputs such as indices are not checked)."""
    return [o for o in _as_tuple(func(*inputs)) if _is_float(o)]


def _numerical(func, inputs, i, outs, eps):
    """Per output: an (inputs[i].numel(), out.numel()) float64 Jacobian by central differences."""
    x = inputs[i]._data
    jac = [np.zeros((x.size, o._data.size)) for o in outs]
    with no_grad():
        for col, idx in enumerate(np.ndindex(x.shape)):
            orig = x[idx].copy() if hasattr(x[idx], "copy") else x[idx]
            x[idx] = orig + eps
            plus = [to_numpy(o._data).astype(np.float64).reshape(-1) for o in _outputs(func, inputs)]
            x[idx] = orig - eps
            minus = [to_numpy(o._data).astype(np.float64).reshape(-1) for o in _outputs(func, inputs)]
            x[idx] = orig
            for k, (p, m) in enumerate(zip(plus, minus)):
                jac[k][col] = (p - m) / (2 * eps)
    return jac


def _analytical(out, diff_inputs):
    """An (input.numel(), out.numel()) Jacobian per differentiable input, one backward per
    output element."""
    xp = get_array_module(out._data)
    jac = [np.zeros((t._data.size, out._data.size)) for t in diff_inputs]
    for j in range(out._data.size):
        onehot = xp.zeros(out._data.size, dtype=out._data.dtype)
        onehot[j] = 1
        grads = autograd_grad([out], diff_inputs, grad_outputs=[Tensor._wrap(onehot.reshape(out._data.shape))],
                              retain_graph=True, allow_unused=True)
        for n, (g, t) in enumerate(zip(grads, diff_inputs)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(t.shape):
                raise GradcheckError(f"Gradient has shape {tuple(g.shape)}, but the input has "
                                     f"shape {tuple(t.shape)}")
            jac[n][:, j] = to_numpy(g._data).astype(np.float64).reshape(-1)
    return jac


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked: bool | None = None) -> bool:
    """Check the gradients of ``func`` against central finite differences, as torch's.

    Every floating-point input that requires grad is perturbed in place by ``+-eps``, one
    element at a time; the resulting numerical Jacobian of every output is compared with the
    one autograd gives (one backward per output element), element by element, with
    ``|analytical - numerical| <= atol + rtol * |numerical|``. Use float64 inputs: torch warns
    otherwise, and so does this.

    Args:
        func: a function of ``inputs`` returning a Tensor or a tuple of Tensors.
        inputs: a Tensor or a tuple of arguments; Tensors with ``requires_grad`` are checked.
        eps: the finite-difference step.
        atol: absolute tolerance.
        rtol: relative tolerance.
        raise_exception: raise :class:`GradcheckError` on a mismatch (else return False).
        nondet_tol: accepted; the backward is run once, so nondeterminism is not measured.
        check_undefined_grad: accepted; not checked (TensorBrain's backward always receives
            defined gradients).
        check_grad_dtypes: also require each gradient's dtype to be its input's.
        check_batched_grad: not supported (no vmap): True raises NotImplementedError.
        check_batched_forward_grad: not supported: True raises NotImplementedError.
        check_forward_ad: not supported (no forward-mode AD): True raises NotImplementedError.
        check_backward_ad: False skips the check (and returns True), as torch.
        fast_mode: accepted; the full (slow-mode) Jacobians are always compared.
        masked: accepted and ignored (no sparse tensors).

    Returns:
        True when every Jacobian matches; False on a mismatch with ``raise_exception=False``.

    Raises:
        GradcheckError: a Jacobian mismatch (with ``raise_exception``), or, when no output
            requires grad, an output whose numerical gradient is not zero (torch's rule: with
            some output differentiable, the others are not checked).
        ValueError: no input requires grad.
        NotImplementedError: one of the unsupported checks was asked for.
    """
    for flag, name in ((check_batched_grad, "check_batched_grad"),
                       (check_batched_forward_grad, "check_batched_forward_grad"),
                       (check_forward_ad, "check_forward_ad")):
        if flag:
            raise NotImplementedError(f"gradcheck({name}=True) is not supported by TensorBrain "
                                      f"(no vmap / forward-mode AD); only the backward check is")
    del nondet_tol, check_undefined_grad, fast_mode, masked
    inputs = _as_tuple(inputs)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")
    for i in diff:
        if not _is_float(inputs[i]) or inputs[i]._data.dtype != np.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          f"point. This check will likely fail if all the inputs are not of "
                          f"double precision floating point.", UserWarning, stacklevel=2)
    if not check_backward_ad:
        return True

    def fail(msg):
        if raise_exception:
            raise GradcheckError(msg)
        return False

    with enable_grad():
        outs = _outputs(func, inputs)
    diff_inputs = [inputs[i] for i in diff]
    analytic = [_analytical(o, diff_inputs) if o.requires_grad else None for o in outs]
    if check_grad_dtypes:
        for o in outs:
            if o.requires_grad:
                ones = get_array_module(o._data).ones(o._data.shape, dtype=o._data.dtype)
                for t, g in zip(diff_inputs, autograd_grad([o], diff_inputs, [Tensor._wrap(ones)],
                                                           retain_graph=True, allow_unused=True)):
                    if g is not None and g._data.dtype != t._data.dtype:
                        return fail(f"Gradient has dtype {g._data.dtype} but the input has "
                                    f"dtype {t._data.dtype}")
    any_diff = any(jac is not None for jac in analytic)
    for n, i in enumerate(diff):
        numeric = _numerical(func, inputs, i, outs, eps)
        for k, jac in enumerate(analytic):
            if jac is None:  # torch checks these only when no output is differentiable
                if any_diff:
                    continue
                if not np.allclose(numeric[k], 0.0, atol=atol, rtol=0):
                    return fail(f"Numerical gradient for function expected to be zero: output {k} "
                                f"does not require grad, but its numerical gradient with respect "
                                f"to input {i} is not zero")
                continue
            a, num = jac[n], numeric[k]
            if not np.allclose(a, num, rtol=rtol, atol=atol):
                return fail(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                            f"numerical:{num}\nanalytical:{a}\n")
    return True
