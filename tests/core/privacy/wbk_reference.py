#!/usr/bin/env python3
"""Reference values for wor_gaussian_test.cc, computed independently of the
C++ code: Wang, Balle & Kasiviswanathan 2019, Theorem 27 (Gaussian, sampling
without replacement, replace-one), with the forward differences taken as the
exact alternating sums sum_i C(k,i) (-1)^(k-i) exp(i(i-1)/(2 z^2)) in 80-digit
arithmetic (mpmath), so no cancellation is lost. Run:
  /usr/bin/python3 tests/core/privacy/wbk_reference.py
"""
import mpmath as mp

mp.mp.dps = 80


def fwd_diff(z, k):
    g = lambda x: mp.e ** (mp.mpf(x) * (x - 1) / (2 * mp.mpf(z) ** 2))
    return mp.fsum(mp.binomial(k, i) * (-1) ** (k - i) * g(i) for i in range(k + 1))


def eps_wor(gamma, z, alpha):
    gamma, z = mp.mpf(gamma), mp.mpf(z)
    s = mp.mpf(1)
    s += gamma ** 2 * mp.binomial(alpha, 2) * min(
        4 * (mp.e ** (1 / z ** 2) - 1), 2 * mp.e ** (1 / z ** 2))
    for j in range(3, alpha + 1):
        lo, hi = 2 * (j // 2), 2 * ((j + 1) // 2)
        fd = 4 * mp.sqrt(fwd_diff(z, lo) * fwd_diff(z, hi))
        s += gamma ** j * mp.binomial(alpha, j) * min(
            fd, 2 * mp.e ** (j * (j - 1) / (2 * z ** 2)))
    return mp.log(s) / (alpha - 1)


if __name__ == "__main__":
    for z, k in [(1, 2), (1, 8), (5, 4), (5, 20), (10, 40), (0.5, 64)]:
        print(f"log fwd diff z={z} k={k}: {mp.nstr(mp.log(fwd_diff(z, k)), 17)}")
    for gamma, z, alpha in [(0.01, 2.0, 2), (0.01, 2.0, 3), (0.01, 2.0, 8),
                            (0.05, 1.0, 16), (1 / 1600, 5.0, 32),
                            (0.01, 10.0, 64), (0.1, 0.8, 5)]:
        print(f"eps_wor gamma={gamma} z={z} alpha={alpha}: "
              f"{mp.nstr(eps_wor(gamma, z, alpha), 17)}")
