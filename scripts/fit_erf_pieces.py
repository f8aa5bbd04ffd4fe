#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Piecewise polynomials for gelu_erf's G (an investigation; no kernel uses them).

docs/performance.md, "The F32 erf family against oneDNN's count", reports what this measures. For
a = |x| in [0, 7.5):

    Phi(-a) = 0.5 erfc(a / sqrt 2) = exp(-a^2 / 2) G(a),   G(a) = 0.5 erfcx(a / sqrt 2),

G smooth and slowly varying (0.5 at 0, ~ 1 / (a sqrt(2 pi)) far out). A kernel would take
j = round(a) (a + 2^23's low bits: one add, no conversion), s = a - j exactly (|s| <= 1/2), and
G(a) = C_j(s), C_j a degree-7 polynomial, its 8 coefficients picked by j from 8-entry tables
(one in-register lookup each): no division, where the kernels' rational fit (scripts/fit_erf.py)
needs two reciprocals. Evaluated in F32 it is within 1.7 u of G, which is what rules out a value
path without pairs under the F32 bound (K = 4 u).

Method: per piece, minimise the relative error |C_j / G - 1| on Chebyshev nodes by least squares
with Lawson's reweighting towards the minimax, in float64 against mpmath; the coefficients are
rounded to F32 one at a time, from c0 up, each rounding absorbed by refitting the ones above it.
Then C_j is evaluated as the kernels do (Horner with fused multiply-adds, each rounded to F32) on
a dense grid of F32 a and compared with mpmath.

Usage: /usr/bin/python3 scripts/fit_erf_pieces.py   (prints the table and the errors; ~20 s)
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 30
DEGREE = 7
PIECES = 8
CLAMP = float(np.float32(7.5) - np.float32(2.0**-21))  # the largest F32 below 7.5
U = 2.0**-24


def g_true(a):
    a = mp.mpf(float(a))
    return float(0.5 * mp.erfc(a / mp.sqrt(2)) * mp.exp(a * a / 2))


def f32(v):
    return float(np.float32(v))


def piece_range(j):
    return max(j - 0.5, 0.0), min(j + 0.5, CLAMP)


def fit_piece(j, nodes=300, iters=40):
    lo, hi = piece_range(j)
    k = np.arange(nodes)
    a = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / nodes)
    s = a - j
    g = np.array([g_true(v) for v in a])
    vander = np.vander(s, DEGREE + 1, increasing=True)
    fixed = []
    for _ in range(DEGREE + 1):
        n_fixed = len(fixed)
        target = g - (vander[:, :n_fixed] @ np.array(fixed) if fixed else 0.0)
        free = vander[:, n_fixed:]
        w = 1.0 / g
        for _ in range(iters):
            coef, *_ = np.linalg.lstsq(free * w[:, None], target * w, rcond=None)
            r = np.abs((free @ coef - target) / g)
            w = w * np.sqrt(r / r.max() + 1e-3)
            w /= w.max()
        fixed.append(f32(coef[0]))
    return fixed


def fma32(a, b, c):  # one rounding to F32 (double rounding through float64 is negligible here)
    return f32(np.float64(a) * np.float64(b) + np.float64(c))


def evaluate(coef, s):  # Horner as the kernels
    v = coef[DEGREE]
    for k in range(DEGREE - 1, -1, -1):
        v = fma32(v, s, coef[k])
    return v


def main():
    table = [fit_piece(j) for j in range(PIECES)]
    print("// c_k of piece j (row k, column j)")
    for k in range(DEGREE + 1):
        print("#define INFINIOP_ERF_G%d %s" % (k, ", ".join("%.9gf" % table[j][k] for j in range(PIECES))))
    worst = 0.0
    for j in range(PIECES):
        lo, hi = piece_range(j)
        grid = np.unique(np.linspace(lo, hi, 4000).astype(np.float32))
        err = 0.0
        for a in grid:
            a = float(a)
            jj = int(np.rint(a))  # ties to even, as a + 2^23
            if jj != j:
                continue
            err = max(err, abs(evaluate(table[j], a - jj) / g_true(a) - 1) / U)
        worst = max(worst, err)
        print("piece %d [%.2f, %.2f]: %.3f u" % (j, lo, hi, err))
    print("worst: %.3f u" % worst)


if __name__ == "__main__":
    main()
