#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The polynomial behind the F32 logarithms (devices/math_constants.h INFINIOP_LOG_P*,
devices/cpu/math-inl.h LogOfReduced, devices/opencl/kernels/math.cl log_of_reduced).

log(f) = 2 atanh(s) = 2 s + s^3 P(s^2),  s = (f - 1) / (f + 1),  z = s^2 in [0, 0.04]

(Log's f in [sqrt(1/2), sqrt(2)) gives z <= 0.0295; Log1p's f = 1 + t below t = 1/2 reaches
s = 1/5.) What P's error costs the result, relative to log(f) >= 2 |s|, is z |P - P_true| / 2:
P of degree 3 is fitted to P_true(z) = (2 atanh(s) - 2 s) / s^3 minimising that weighted error
(linear least squares on Chebyshev nodes with Lawson's reweighting towards the minimax), then
rounded to F32 one coefficient at a time, the later ones refitted after each rounding.

Usage: /usr/bin/python3 scripts/fit_log.py   (prints the coefficients and the error in u of
log(f), u = 2^-24; about a second)
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
Z_MAX = 0.04
DEGREE = 3
U = 2.0 ** -24


def p_true(z):
    z = mp.mpf(z)
    if z == 0:
        return mp.mpf(2) / 3
    s = mp.sqrt(z)
    return (2 * mp.atanh(s) - 2 * s) / s ** 3


def fit(fixed, nodes=2000, iterations=60):
    """Coefficients DEGREE + 1 - len(fixed) onwards, the first len(fixed) given."""
    zs = np.array([Z_MAX * (1 - np.cos(np.pi * (i + 0.5) / nodes)) / 2 for i in range(nodes)])
    target = np.array([float(p_true(z) - sum(mp.mpf(c) * mp.mpf(z) ** k
                                             for k, c in enumerate(fixed))) for z in zs])
    powers = list(range(len(fixed), DEGREE + 1))
    a = np.array([[z ** k for k in powers] for z in zs])
    weights = np.ones(nodes)
    for _ in range(iterations):
        scale = weights * zs  # the error's weight in the result: z / 2
        coefficients, *_ = np.linalg.lstsq(a * scale[:, None], target * scale, rcond=None)
        error = np.abs((a @ coefficients - target) * zs)
        weights = weights * (error / error.max() + 1e-3)
        weights /= weights.max()
    return list(fixed) + list(coefficients)


def error_u(coefficients):
    """max z |P - P_true| / 2 over a dense grid, in u of log(f)."""
    worst = 0
    for z in np.linspace(0, Z_MAX, 4001):
        p = sum(mp.mpf(float(c)) * mp.mpf(z) ** k for k, c in enumerate(coefficients))
        worst = max(worst, abs(float((p - p_true(z)) * z / 2)))
    return worst / U


def main():
    rounded = []
    for k in range(DEGREE + 1):
        rounded.append(float(np.float32(fit(tuple(rounded))[k])))
    print("unrounded fit: %.5f u" % error_u(fit(())))
    print("F32 coefficients: %.5f u" % error_u(rounded))
    for k, c in enumerate(rounded):
        print("#define INFINIOP_LOG_P%d %sf" % (k, repr(np.float32(c))))


if __name__ == "__main__":
    main()
