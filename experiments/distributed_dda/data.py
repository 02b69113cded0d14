"""Datasets and reference optima of the distributed-DDA reproduction (Liu,
Johansson & Shi 2023, Sec. 5).

Every dataset gets unit-L2-norm rows (so L = 1 for the hinge loss) and
exactly N = 20 q rows (equal shards, as the theory assumes):
  * a9a: the LIBSVM Adult file (the last row dropped: 32,560 = 20 x 1628),
    test accuracy on a9a.t with the same row scaling;
  * ipums-br: every column min-max scaled to [0, 1] (line-search family's
    preprocessing), then unit rows; labels 0/1 -> -1/+1; 38,000 = 20 x 1900;
  * synth-eps: a generated dense dataset of the LIBSVM epsilon shape
    (m = 2000 dense features, unit rows, labels from a random teacher with
    10% flipped), N = 20 q at a size that fits the time budget.

F*(reference) is the non-private optimum of the full objective
F(x) = (1/N) sum hinge + h(x) computed here, independently of dpopt:
  * l2-SVM, h = (mu/2)||x||^2: dual coordinate descent (Hsieh et al. 2008)
    with C = 1/(N mu), stopped at a relative duality gap below 1e-8;
  * l1-SVM, h = phi ||x||_1: the exact linear program
    min (1/N) sum xi + phi sum (u + v), xi_i >= 1 - y_i <c_i, u - v>,
    u, v, xi >= 0, solved by HiGHS (scipy.optimize.linprog).
"""
import numpy as np
import scipy.optimize
import scipy.sparse as sp

NODES = 20


def _unit_rows(x):
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel()) if sp.issparse(x) \
        else np.linalg.norm(x, axis=1)
    norms[norms == 0] = 1
    if sp.issparse(x):
        return sp.csr_matrix(sp.diags(1 / norms) @ x)
    return x / norms[:, None]


def _read_libsvm(path, dim):
    ys, rows, cols, vals = [], [], [], []
    for r, line in enumerate(open(path)):
        p = line.split()
        ys.append(float(p[0]))
        for t in p[1:]:
            i, v = t.split(":")
            rows.append(r)
            cols.append(int(i) - 1)
            vals.append(float(v))
    x = sp.csr_matrix((vals, (rows, cols)), shape=(len(ys), dim))
    return x, np.asarray(ys)


def load(name, data_dir, synth_q):
    """Returns dict(x, y, test=(x, y) or None, m, q, desc)."""
    if name == "a9a":
        x, y = _read_libsvm(f"{data_dir}/adult/a9a", 123)
        xt, yt = _read_libsvm(f"{data_dir}/adult/a9a.t", 123)
        n = (x.shape[0] // NODES) * NODES
        x, y = _unit_rows(x[:n]), y[:n]
        return dict(x=x, y=y, test=(_unit_rows(xt), yt), m=123, q=n // NODES,
                    desc="LIBSVM a9a (Adult), unit rows, last row dropped")
    if name == "ipums-br":
        raw = np.loadtxt(f"{data_dir}/ipums-br/ipums-br.dat")
        x, y = raw[:, :-1], np.where(raw[:, -1] > 0, 1.0, -1.0)
        lo, hi = x.min(axis=0), x.max(axis=0)
        x = (x - lo) / np.where(hi > lo, hi - lo, 1)
        n = (x.shape[0] // NODES) * NODES
        return dict(x=_unit_rows(x[:n]), y=y[:n], test=None, m=x.shape[1], q=n // NODES,
                    desc="IPUMS-BR, min-max scaled columns, unit rows")
    if name == "synth-eps":
        m, n = 2000, NODES * synth_q
        rng = np.random.default_rng(20230221)
        teacher = rng.standard_normal(m)
        x = rng.standard_normal((n, m))
        y = np.where(x @ teacher >= 0, 1.0, -1.0)
        y[rng.random(n) < 0.1] *= -1
        return dict(x=_unit_rows(x), y=y, test=None, m=m, q=synth_q,
                    desc=f"generated, epsilon's shape (m = 2000 dense), unit rows, N = {n}")
    raise ValueError(name)


def objective(x, y, w, reg, coef):
    """F(w) on all rows; w may be (k, m) for k points at once."""
    w = np.atleast_2d(w)
    margins = (x @ w.T) * y[:, None]
    hinge = np.maximum(0, 1 - margins).mean(axis=0)
    if reg == "l2":
        return hinge + 0.5 * coef * (w * w).sum(axis=1)
    return hinge + coef * np.abs(w).sum(axis=1)


def accuracy(x, y, w):
    return float(np.mean(np.where(x @ w >= 0, 1.0, -1.0) == y))


def fstar_l2(x, y, mu, max_epochs=3000, tol=1e-8, seed=0):
    """Dual coordinate descent for min (1/N) sum hinge + (mu/2)||w||^2."""
    n = x.shape[0]
    c = 1.0 / (n * mu)  # primal scaled by 1/(N mu): 1/2||w||^2 + C sum hinge
    xd = x.toarray() if sp.issparse(x) else np.asarray(x)
    qii = (xd * xd).sum(axis=1)
    alpha = np.zeros(n)
    w = np.zeros(xd.shape[1])
    rng = np.random.default_rng(seed)
    gap = np.inf
    for epoch in range(max_epochs):
        for i in rng.permutation(n):
            g = y[i] * xd[i].dot(w) - 1
            a = min(max(alpha[i] - g / qii[i], 0.0), c)
            if a != alpha[i]:
                w += (a - alpha[i]) * y[i] * xd[i]
                alpha[i] = a
        primal = float(objective(xd, y, w, "l2", mu)[0])
        # F = mu (1/2 ||w||^2 + C sum hinge), whose dual is
        # mu (sum a - 1/2 ||w||^2) with w = sum a_i y_i x_i, 0 <= a_i <= C.
        dual = mu * (alpha.sum() - 0.5 * w.dot(w))
        gap = primal - dual
        if gap <= tol * max(1.0, abs(primal)):
            break
    return w, primal, gap, epoch + 1


def fstar_l1(x, y, phi):
    """The l1-SVM linear program, solved exactly by HiGHS."""
    n, m = x.shape
    xs = sp.csr_matrix(x)
    yx = sp.diags(y) @ xs
    # variables [u (m), v (m), xi (n)]; constraint -yx u + yx v - xi <= -1
    a_ub = sp.hstack([-yx, yx, -sp.identity(n)], format="csr")
    b_ub = -np.ones(n)
    cost = np.concatenate([np.full(2 * m, phi), np.full(n, 1.0 / n)])
    res = scipy.optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=(0, None),
                                 method="highs", options={"presolve": True})
    if res.status != 0:
        raise RuntimeError("linprog: " + res.message)
    w = res.x[:m] - res.x[m:2 * m]
    return w, float(objective(xs, y, w, "l1", phi)[0]), float(res.fun)
