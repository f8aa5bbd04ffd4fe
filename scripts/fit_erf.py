#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The rational fit behind gelu_erf's Phi (devices/math_constants.h, devices/cpu/math-inl.h).

For a = |x| in [0, 13.2] (beyond, exp(-a^2 / 2) is below the kernels' exp clamp at exp(-87)):

    Phi(-a) = 0.5 erfc(a / sqrt 2) = exp(-a^2 / 2) G(a),   G(a) = P(a) / Q(a),

P of degree 4, Q of degree 5 with Q(0) = 1 (G ~ 1 / (a sqrt(2 pi)) at infinity, as P / Q). G is
0.5 erfcx(a / sqrt 2), entire and smooth, so no branch is needed: one rational on the whole range
keeps the left tail's relative accuracy, and the same exp gives phi(x) for the derivative.

The kernels evaluate it as F = 1 / G = Q / P = k a + S / P = k a + 2 + a R / P (S of degree 4:
Q's division by P; R = (S - 2 P) / a of degree 3, S(0) = 2 P(0) = 1). Horner on P and Q directly
loses up to 4.7 u where a is large (their leading terms dominate, so every step's rounding counts
in full); in k a + ... the quotient tends to a constant and its errors are damped by k a, and with
the exact 2 in front, near a = 0 (S and P just above powers of two) they are damped by a.

Method: minimise the relative error |P / (G Q) - 1| on Chebyshev nodes by linearised least
squares (Loeb: weights 1 / Q_previous), with Lawson's reweighting towards the minimax, in float64
against mpmath; then round to F32 and measure P / Q as the kernel evaluates it (Horner with
fused multiply-adds, each rounded to F32) on every F32 a of a dense grid.

Usage: /usr/bin/python3 scripts/fit_erf.py   (prints the coefficients and the errors; ~10 s)
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
A_MAX = 13.2
M, N = 4, 5  # degrees of P and Q
U = 2.0 ** -24  # F32 unit roundoff


def g_true(a):
    a = mp.mpf(float(a))
    return 0.5 * mp.erfc(a / mp.sqrt(2)) * mp.exp(a * a / 2)


def fit(nodes=3000, iters=300):
    k = np.arange(nodes)
    a = (A_MAX / 2) * (1 - np.cos(np.pi * (k + 0.5) / nodes))
    f = np.array([float(g_true(v)) for v in a])
    w = np.ones(nodes)
    q_prev = np.ones(nodes)
    for _ in range(iters):
        cols = [a ** i for i in range(M + 1)] + [-f * a ** j for j in range(1, N + 1)]
        scale = np.sqrt(w) / (f * q_prev)
        sol, *_ = np.linalg.lstsq(np.stack(cols, 1) * scale[:, None], f * scale, rcond=None)
        p, q = sol[:M + 1], np.concatenate([[1.0], sol[M + 1:]])
        q_prev = np.polyval(q[::-1], a)
        err = np.polyval(p[::-1], a) / q_prev / f - 1
        w = w * np.abs(err)
        w /= w.sum()
    return p, q, np.abs(err).max()


def f32(v):
    return np.float32(v)


def fma32(a, b, c):
    # a b is exact in float64 (24 + 24 bits); the one rounding to F32 is then the fma's, except
    # for a rare double rounding, which only makes this measurement more pessimistic.
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


def horner32(coeffs, a):
    r = f32(coeffs[-1])
    for c in coeffs[-2::-1]:
        r = fma32(r, a, f32(c))
    return r


def quotient32(p, q):
    # The kernel's corrected quotient: r ~ 1 / q, v = p r, v + (p - v q) r with the remainder exact.
    r = np.float32(1.0 / np.float64(q))
    v = np.float32(p * r)
    rem = fma32(-v, q, p)
    return fma32(rem, r, v)


def kernel32(k, r32, p32, a):
    """G(a) as the kernels compute it: 1 / (k a + W), W = 2 + a R / P, the quotients corrected
    and F kept as the pair (k a, W) in the last one's remainder."""
    ka = np.float32(k * a)
    w = fma32(a, quotient32(horner32(r32, a), horner32(p32, a)), np.float32(2))
    r = np.float32(1.0 / np.float64(np.float32(ka + w)))
    v = r
    rem = fma32(-v, w, fma32(-v, ka, np.float32(1)))
    return fma32(rem, r, v)


def main():
    p, q, err64 = fit()
    # Q = (k a + c) P + R (R of degree 3), so Q / P = k a + S / P with S = c P + R.
    k = q[N] / p[M]
    rest = q.copy()
    rest[1:] -= k * p
    c = rest[M] / p[M]
    rest[:M + 1] -= c * p
    s = rest[:M + 1] + c * p
    s[M] = c * p[M]
    r = (s - 2 * p)[1:]
    p32, r32, k32 = [f32(v) for v in p], [f32(v) for v in r], f32(k)
    print(f"G = P / Q on [0, {A_MAX}], degrees {M} / {N}: float64 fit max relative error "
          f"{err64:.3g} = {err64 / U:.3f} u")
    print(f"k = {float(k32)!r}f")
    print("R (constant first):", ", ".join(f"{float(v)!r}f" for v in r32))
    print("P (constant first):", ", ".join(f"{float(v)!r}f" for v in p32))
    q32 = [f32(v) for v in q]
    rng = np.random.default_rng(1)
    grid = np.concatenate([np.linspace(0, A_MAX, 20000), rng.uniform(0, A_MAX, 20000),
                           rng.uniform(0, 2, 10000)]).astype(np.float32)
    worst_coef, worst_eval, worst_plain = 0.0, 0.0, 0.0
    for a in grid:
        truth = g_true(a)
        exact_coef = (mp.polyval([mp.mpf(float(c)) for c in p32[::-1]], mp.mpf(float(a))) /
                      mp.polyval([mp.mpf(float(c)) for c in q32[::-1]], mp.mpf(float(a))))
        worst_coef = max(worst_coef, float(abs(exact_coef / truth - 1)))
        plain = quotient32(horner32(p32, a), horner32(q32, a))
        worst_plain = max(worst_plain, float(abs(mp.mpf(float(plain)) / truth - 1)))
        got = kernel32(k32, r32, p32, a)
        worst_eval = max(worst_eval, float(abs(mp.mpf(float(got)) / truth - 1)))
    print(f"F32 coefficients of P / Q, exact arithmetic: max relative error {worst_coef / U:.3f} u")
    print(f"F32 evaluation of P / Q by Horner: {worst_plain / U:.3f} u; as the kernels do, "
          f"1 / (k a + 2 + a R / P): {worst_eval / U:.3f} u (max relative error over {grid.size} points)")


if __name__ == "__main__":
    main()
