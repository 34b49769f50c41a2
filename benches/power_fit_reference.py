"""Straightforward numpy/scipy implementation of the power-model estimation (Guerreiro et al.,
Sec. III-D), the same algorithm as the Rust core's `power::fit` for the PerConfig and PerDomain
variants: the baseline of the speed benchmark and a cross-check of the reached SSE.

Model per domain d (0 = core, 1 = memory), x_d = f_d / f_ref,d, V normalized (1 at reference):
    P_d = s_d V_d + V_d^2 x_d (i_d + sum_{c in d} w_c U_c)
Algorithm: initial NNLS on the reference configuration and its two neighbours with V = 1;
then repeat (one coordinate sweep over the domains: per monotonicity chain, pool-adjacent-
violators whose block values are least-squares fits with bounds) -> NNLS over all rows ->
line search along the voltage step, until max |dV| <= tol_voltage and the relative objective
change <= tol_objective. Differences from Rust: row-wise arithmetic (no per-configuration
moments), scipy's iterative least_squares instead of the exact quartic solve, and no Curve
variant.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares, nnls


def _design(v_rows, x_rows, util, comp_domain, folded, initial=False):
    """Columns: static core, static mem, idle core, idle mem, one per component."""
    n = len(util)
    a = np.zeros((n, 4 + util.shape[1]))
    for d in range(2):
        a[:, d] = v_rows[:, d]
        if not folded[d]:
            a[:, 2 + d] = v_rows[:, d] ** 2 * x_rows[:, d]
    if initial:
        a[:, 1] = 0.0  # identical to the core static column when every V is 1
    h = v_rows ** 2 * x_rows
    a[:, 4:] = h[:, comp_domain] * util
    return a


def _coefficients(a, p, sw, ridge):
    aw = a * sw[:, None]
    pw = p * sw
    if ridge > 0:
        # ridge on the weights relative to each column's sum of squares (as in Rust)
        norms = np.sqrt(ridge * (aw[:, 4:] ** 2).sum(axis=0))
        extra = np.zeros((len(norms), a.shape[1]))
        extra[np.arange(len(norms)), 4 + np.arange(len(norms))] = norms
        aw = np.vstack([aw, extra])
        pw = np.concatenate([pw, np.zeros(len(norms))])
    keep = np.abs(aw).sum(axis=0) > 0
    coef = np.zeros(a.shape[1])
    coef[keep] = nnls(aw[:, keep], pw, maxiter=50 * a.shape[1])[0]
    return coef


def fit_reference(watts, core_mhz, mem_mhz, util, domain_sizes, ref_core_mhz, ref_mem_mhz,
                  variant="per-config", max_iter=3000, tol_voltage=1e-6, tol_objective=1e-9,
                  v_min=0.5, v_max=1.5, relative_weighting=False, ridge=0.0):
    """Returns a dict: static_coef, idle_coef, weights, configs [(fc, fm)], voltages
    (n_configs x 2), iterations, converged, sse (W^2), objective, train_mape (%)."""
    p = np.asarray(watts, float)
    clocks = np.column_stack([np.asarray(core_mhz, float), np.asarray(mem_mhz, float)])
    util = np.asarray(util, float).reshape(len(p), -1)
    comp_domain = np.repeat([0, 1], domain_sizes)
    refs = np.array([ref_core_mhz, ref_mem_mhz], float)
    x_rows = clocks / refs
    levels = [np.unique(clocks[:, d]) for d in range(2)]
    folded = [len(levels[d]) == 1 for d in range(2)]
    lev_rows = np.column_stack([np.searchsorted(levels[d], clocks[:, d]) for d in range(2)])
    ref_lev = [int(np.searchsorted(levels[d], refs[d])) for d in range(2)]
    configs = sorted({(int(a), int(b)) for a, b in lev_rows}, key=lambda c: (c[1], c[0]))
    cfg_index = {c: k for k, c in enumerate(configs)}
    row_cfg = np.array([cfg_index[(a, b)] for a, b in lev_rows])
    ref_cfg = cfg_index[tuple(ref_lev)]
    w_rows = 1.0 / p ** 2 if relative_weighting else np.ones_like(p)
    sw = np.sqrt(w_rows)

    # voltage parameters: per configuration, or per clock level of the domain
    if variant == "per-config":
        param_of_cfg = [np.arange(len(configs))] * 2
        chains = []
        for d in range(2):
            o = 1 - d
            ch = []
            for lo in range(len(levels[o])):
                ks = sorted([k for k, c in enumerate(configs) if c[o] == lo], key=lambda k: configs[k][d])
                if ks:
                    ch.append((ks, ks.index(ref_cfg) if ref_cfg in ks else None))
            chains.append(ch)
    elif variant == "per-domain":
        param_of_cfg = [np.array([c[d] for c in configs]) for d in range(2)]
        chains = [[(list(range(len(levels[d]))), ref_lev[d])] for d in range(2)]
    else:
        raise ValueError(f"unknown variant {variant!r}")
    n_par = [int(param_of_cfg[d].max()) + 1 for d in range(2)]
    row_par = [param_of_cfg[d][row_cfg] for d in range(2)]
    rows_of_par = [[np.flatnonzero(row_par[d] == q) for q in range(n_par[d])] for d in range(2)]
    vp = [np.ones(n_par[d]) for d in range(2)]

    def v_rows(vp):
        return np.column_stack([vp[d][row_par[d]] for d in range(2)])

    # step 1: reference and neighbouring configurations, V = 1
    init = [ref_cfg]
    for d in range(2):
        r = ref_lev[d]
        for lv in list(range(r + 1, len(levels[d]))) + list(range(r - 1, -1, -1)):
            want = list(configs[ref_cfg])
            want[d] = lv
            if tuple(want) in cfg_index:
                init.append(cfg_index[tuple(want)])
                break
    sel = np.isin(row_cfg, init)
    a0 = _design(v_rows(vp)[sel], x_rows[sel], util[sel], comp_domain, folded, initial=True)
    coef = _coefficients(a0, p[sel], sw[sel], ridge)

    def predict(coef, vp):
        return _design(v_rows(vp), x_rows, util, comp_domain, folded) @ coef

    def objective(coef, vp):
        return float((w_rows * (p - predict(coef, vp)) ** 2).sum())

    def activity(coef, d):
        act = coef[2 + d] + util[:, comp_domain == d] @ coef[4:][comp_domain == d]
        return act

    def block_solve(rows, d, coef, vcur, lo, hi, x0):
        o = 1 - d
        act_d, act_o = activity(coef, d)[rows], activity(coef, o)[rows]
        vo = vcur[rows, o]
        other = coef[o] * vo + vo ** 2 * x_rows[rows, o] * act_o
        sr = sw[rows]

        def res(v):
            return sr * (coef[d] * v[0] + v[0] ** 2 * x_rows[rows, d] * act_d + other - p[rows])

        if hi <= lo:
            return lo
        return float(least_squares(res, [min(max(x0, lo), hi)], bounds=([lo], [hi])).x[0])

    def isotonic(params, d, coef, vcur, lo, hi):
        blocks = []  # [param list, value]
        for q in params:
            rows = rows_of_par[d][q]
            blocks.append([[q], block_solve(rows, d, coef, vcur, lo, hi, vp[d][q])])
            while len(blocks) >= 2 and blocks[-2][1] > blocks[-1][1]:
                last = blocks.pop()
                blocks[-1][0] += last[0]
                rows = np.concatenate([rows_of_par[d][t] for t in blocks[-1][0]])
                blocks[-1][1] = block_solve(rows, d, coef, vcur, lo, hi, 0.5 * (blocks[-1][1] + last[1]))
        return {q: v for qs, v in blocks for q in qs}

    def voltage_step(coef, vp):
        vp = [v.copy() for v in vp]
        for d in range(2):
            if folded[d]:
                continue
            vcur = v_rows(vp)
            for params, anchor in chains[d]:
                if anchor is None:
                    sol = isotonic(params, d, coef, vcur, v_min, v_max)
                else:
                    sol = isotonic(params[:anchor], d, coef, vcur, v_min, 1.0)
                    sol.update(isotonic(params[anchor + 1:], d, coef, vcur, 1.0, v_max))
                    sol[params[anchor]] = 1.0
                for q, v in sol.items():
                    vp[d][q] = v
        return vp

    def feasible(vp):
        return all(np.all(np.diff(vp[d][params]) >= 0) for d in range(2) for params, _ in chains[d])

    obj, step, converged, it = np.inf, 1.0, False, 0
    while it < max_iter:
        it += 1
        old = vp
        vp = voltage_step(coef, vp)
        coef = _coefficients(_design(v_rows(vp), x_rows, util, comp_domain, folded), p, sw, ridge)
        new_obj = objective(coef, vp)
        if it > 1:
            trial = [np.clip(n + step * (n - o), v_min, v_max) for o, n in zip(old, vp)]
            if feasible(trial):
                c = _coefficients(_design(v_rows(trial), x_rows, util, comp_domain, folded), p, sw, ridge)
                o_ = objective(c, trial)
                if o_ < new_obj:
                    vp, coef, new_obj, step = trial, c, o_, min(step * 1.5, 16.0)
                else:
                    step = max(step * 0.5, 0.25)
        dv = max(float(np.max(np.abs(a - b))) for a, b in zip(old, vp))
        dobj = abs(obj - new_obj)
        obj = new_obj
        if dv <= tol_voltage and dobj <= tol_objective * obj:
            converged = True
            break
    pred = predict(coef, vp)
    volts = np.array([[vp[d][param_of_cfg[d][k]] for d in range(2)] for k in range(len(configs))])
    return {
        "static_coef": coef[0:2], "idle_coef": coef[2:4], "weights": coef[4:],
        "configs": [(levels[0][a], levels[1][b]) for a, b in configs], "voltages": volts,
        "iterations": it, "converged": converged, "objective": obj,
        "sse": float(((p - pred) ** 2).sum()),
        "train_mape": float(100 * np.mean(np.abs(pred - p) / p)),
    }
