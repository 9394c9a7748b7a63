"""``tb.autograd.gradcheck`` (torch's name): programs with a custom ``autograd.Function`` call it.
Each case's verdict is compared with torch's ``gradcheck`` on the same function when torch is
installed; without torch, with the verdict known from the math (a right or a wrong backward)."""
import numpy as np
import pytest

import tensorbrain as tb

RNG = np.random.default_rng(0)


def _make(lib, scale):
    """A clamp-like Function whose backward multiplies the gradient by ``scale`` where the
    input is outside [-1, 1] (0 is the true derivative: scale 0 is right, 0.1 wrong)."""
    class Clamp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, limit):
            ctx.save_for_backward(x)
            ctx.limit = limit
            return x.clamp(min=-limit, max=limit)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            out = g.clone()
            out[x.abs() > ctx.limit] *= scale
            return out, None
    return Clamp


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


# values away from the kinks at +-1, so finite differences are exact there
X = np.array([-2.0, -0.5, 0.25, 0.75, 1.5, 3.0])


@pytest.mark.parametrize("scale, expected", [(0.0, True), (0.1, False)])
def test_custom_function_verdict_matches_torch(scale, expected):
    fn = _make(tb, scale)
    x = tb.tensor(X, dtype=tb.float64, requires_grad=True)
    got = tb.autograd.gradcheck(lambda t: fn.apply(t, 1.0), (x,), raise_exception=False)
    torch = _torch()
    if torch is not None:
        tfn = _make(torch, scale)
        tx = torch.tensor(X, dtype=torch.float64, requires_grad=True)
        expected = torch.autograd.gradcheck(lambda t: tfn.apply(t, 1.0), (tx,),
                                            raise_exception=False)
    assert got is expected


def test_mismatch_raises_torch_error_and_message():
    fn = _make(tb, 0.1)
    x = tb.tensor(X, dtype=tb.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0"):
        tb.autograd.gradcheck(lambda t: fn.apply(t, 1.0), x)
    from tensorbrain.autograd.gradcheck import GradcheckError
    with pytest.raises(GradcheckError):
        tb.autograd.gradcheck(lambda t: fn.apply(t, 1.0), (x,))


def test_several_inputs_and_outputs_and_non_tensor_arguments():
    a = tb.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    b = tb.tensor(RNG.standard_normal((3,)), requires_grad=True)
    c = tb.tensor(RNG.standard_normal((3,)))            # no grad: not checked

    def fn(x, y, z, k):
        return (x * y).sum(0) * k + z, (x.exp() @ y).tanh()
    assert tb.autograd.gradcheck(fn, (a, b, c, 2.0))
    torch = _torch()
    if torch is not None:
        ta, tb_, tc = (torch.tensor(v.detach().numpy(), requires_grad=v.requires_grad)
                         for v in (a, b, c))
        assert torch.autograd.gradcheck(fn, (ta, tb_, tc, 2.0))


def test_errors_and_warnings_as_torch():
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        tb.autograd.gradcheck(lambda t: t * 2, (tb.ones(2, dtype=tb.float64),))
    x32 = tb.tensor(X.astype(np.float32), requires_grad=True)
    with pytest.warns(UserWarning, match="not a double precision"):
        tb.autograd.gradcheck(lambda t: t * 3, (x32,), eps=1e-2, atol=1e-2, rtol=1e-2)
    with pytest.raises(NotImplementedError, match="check_forward_ad"):
        tb.autograd.gradcheck(lambda t: t, (tb.ones(1, dtype=tb.float64, requires_grad=True),),
                              check_forward_ad=True)


def test_input_is_restored_after_the_check():
    x = tb.tensor(X, dtype=tb.float64, requires_grad=True)
    tb.autograd.gradcheck(lambda t: t.sin(), (x,))
    np.testing.assert_array_equal(x.detach().numpy(), X)


@pytest.mark.parametrize("case, expected", [("mixed", True), ("all_detached", False),
                                             ("constant", True)])
def test_outputs_without_grad_follow_torchs_rule(case, expected):
    # torch ignores outputs that do not require grad when another output does; when none does,
    # it requires their numerical gradient to be zero
    fns = {"mixed": lambda t: (t * 2, t.detach() * 2, t.detach().argmax()),
           "all_detached": lambda t: t.detach() * 2,
           "constant": lambda t: t.detach() * 0}
    y = RNG.standard_normal(3)
    got = tb.autograd.gradcheck(fns[case], (tb.tensor(y, requires_grad=True),),
                                raise_exception=False)
    torch = _torch()
    if torch is not None:
        expected = torch.autograd.gradcheck(fns[case], (torch.tensor(y, requires_grad=True),),
                                            raise_exception=False)
    assert got is expected
