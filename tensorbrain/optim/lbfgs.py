"""L-BFGS with an optional strong-Wolfe line search: a port of ``torch/optim/lbfgs.py`` (itself
after minFunc) onto flat NumPy/CuPy vectors, with the same state keys and stopping rules.

All parameters are handled as one flat vector (parameter groups are not supported, as in
torch). Scalars (losses, dot products, step lengths) are Python floats; torch keeps some as
0-d tensors, which changes nothing in the arithmetic beyond rounding.
"""
from __future__ import annotations

import math

from .._xp import get_array_module
from ..autograd import enable_grad
from .optimizer import Optimizer


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to ``bounds``."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Line search along ``d`` for a step ``t`` meeting the strong Wolfe conditions
    (bracketing, then zoom by cubic interpolation). Returns ``(f, g, t, evaluations)``."""
    xp = get_array_module(d)
    d_norm = float(xp.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # interpolate (extrapolate) a longer step
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:   # reached the maximum number of evaluations
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]

    # zoom: shrink the bracket until a point meets the conditions
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        # A point too close to a bracket end makes no progress: move it 10% of the way in.
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


class LBFGS(Optimizer):
    """``torch.optim.LBFGS``: limited-memory BFGS; ``step(closure)`` runs up to ``max_iter``
    iterations, each one (or, with ``line_search_fn='strong_wolfe'``, several) evaluations of
    ``closure`` (which must zero the gradients, compute the loss, call backward and return it).

    One parameter group only, as in torch.

    Args:
        params: the parameters (one group).
        lr: the step length (the first iteration scales it by ``min(1, 1 / |g|_1)``).
        max_iter: iterations per ``step``; max_eval: closure evaluations per ``step``
            (default ``max_iter * 5 // 4``).
        tolerance_grad: stop when ``max |g|`` is at most this.
        tolerance_change: stop when the step or the loss changes by less than this.
        history_size: curvature pairs kept.
        line_search_fn: None (fixed step ``lr``) or ``'strong_wolfe'``.

    Raises:
        ValueError: a negative lr, another line search, several parameter groups.

    >>> import tensorbrain as tb
    >>> x = tb.tensor([1.5, -0.5], requires_grad=True)
    >>> opt = tb.optim.LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2   # Rosenbrock
    ...     loss.backward()
    ...     return loss
    >>> for _ in range(5):
    ...     _ = opt.step(closure)
    >>> [round(v, 3) for v in x.tolist()]
    [1.0, 1.0]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ***** the parameters as one flat vector *****
    def _gather_flat_grad(self):
        xp = get_array_module(self._params[0]._data)
        return xp.concatenate([xp.zeros(p._data.size, p._data.dtype) if p.grad is None
                               else p.grad._data.reshape(-1) for p in self._params])

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            n = p._data.size
            p._data += (step_size * update[offset:offset + n]).reshape(p._data.shape).astype(
                p._data.dtype, copy=False)
            p._version[0] += 1
            offset += n

    def _clone_param(self):
        return [p._data.copy() for p in self._params]

    def _set_param(self, params_data):
        for p, pdata in zip(self._params, params_data, strict=True):
            p._data[...] = pdata

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """Run one L-BFGS optimisation step (several closure evaluations).

        Args:
            closure: re-evaluates the model and returns the loss (required).

        Returns:
            The loss of the first closure evaluation.
        """
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the loss")

        def evaluate():
            with enable_grad():
                return closure()

        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        xp = get_array_module(self._params[0]._data)

        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if float(xp.abs(flat_grad).max()) <= tolerance_grad:   # already optimal
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n_iter = 0
        opt_cond = False
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            # the direction: two-loop recursion over the stored curvature pairs
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, H_diag = [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:   # keep the pair only while curvature is positive
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y @ y)
                num_old = len(old_dirs)
                al = [None] * history_size
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            # the step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(xp.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:   # not a descent direction
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(evaluate, x, t, d)
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            # the stopping rules, in torch's order
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(xp.abs(d * t).max()) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
