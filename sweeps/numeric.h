// Portable numerics for random search: a counter-based PRNG, inverse CDFs and
// a keyed permutation. Internal to sweeps/ (sweep.h is the public contract).
//
// Why our own: std:: distributions (and std::lgamma's global signgam) differ
// between standard libraries and are not thread-safe everywhere; a sweep file
// and a seed must give the same trials on any machine. Everything here uses
// only IEEE double arithmetic (+ - * / sqrt, correctly rounded everywhere) and
// libm's exp, log, log1p; sweeps/ is compiled with -ffp-contract=off so no
// compiler fuses a multiply-add differently on another machine.
// Thread safety: every function is pure.
#pragma once

#include <cstdint>
#include <string_view>

namespace swept::sweeps::numeric {

// SplitMix64's output function (Steele, Lea and Flood 2014; Stafford's mix 13):
// a bijective 64-bit mixer with good avalanche.
uint64_t mix64(uint64_t z);

// 64-bit FNV-1a of a string: names a parameter's random stream by its path, so
// adding a parameter does not change the draws of the others.
uint64_t fnv1a64(std::string_view text);

// The uniform number that random search feeds to parameter `stream` of trial
// `index`: ((mix64(...) >> 11) + 0.5) / 2^53, strictly inside (0, 1), so every
// inverse CDF below stays finite. Independent per (seed, index, stream).
double uniform_open01(uint64_t seed, int64_t index, uint64_t stream);

// The standard normal quantile Phi^-1(p) for p in (0, 1): Wichura's AS 241
// (PPND16), relative error about 1e-16.
double normal_quantile(double p);

// log Gamma(x) for x > 0 (Stirling series after shifting x to >= 15).
double log_gamma(double x);

// The regularized incomplete beta function I_x(a, b), a, b > 0, x in [0, 1]
// (continued fraction, modified Lentz).
double incomplete_beta(double x, double a, double b);

// The beta(a, b) quantile: the x in [0, 1] with I_x(a, b) = p, by Newton's
// method kept inside a shrinking bracket (bisection when Newton leaves it).
double beta_quantile(double p, double a, double b);

// numpy.round: to the nearest integer, halves to the even one.
double round_half_even(double x);

// A keyed bijection of [0, n): a 4-round Feistel network on the smallest
// even-width bit domain holding n, with cycle walking. Lets a grid be walked
// in a seeded random order while trial i is still computed alone.
uint64_t permute_index(uint64_t index, uint64_t n, uint64_t key);

}  // namespace swept::sweeps::numeric
