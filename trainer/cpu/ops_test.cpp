// Gradient checks of every layer of the CPU backend against central finite
// differences, in double precision: CpuOps<double> is the backend's own code
// path (threads, partitioning, OpenBLAS dgemm), so float noise cannot hide a
// wrong derivative. Each check builds the scalar L = Σ r·y for a random r,
// runs backward with dy = r, and compares dL/dθ with (L(θ+h) - L(θ-h)) / 2h.
// Also: softmax cross-entropy, dropout, optimizer updates against values
// computed by hand, and the float CPU backend against the double one.
#include "trainer/cpu/ops.h"

#include <doctest/doctest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "trainer/backend.h"
#include "trainer/counter_rng.h"
#include "trainer/cpu/kernel_choice.h"

using namespace swept::trainer;
using namespace swept::trainer::cpu;

namespace {

// The largest elementwise difference relative to the reference's largest
// magnitude.
template <typename Ref>
double max_rel(const std::vector<float>& a, const std::vector<Ref>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - static_cast<double>(ref[i])));
    den = std::max(den, std::abs(static_cast<double>(ref[i])));
  }
  return num / den;
}

std::vector<double> random_vector(size_t n, std::mt19937_64& gen, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (double& x : v) x = u(gen);
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks analytic gradient `grad` of loss() with respect to `theta` at up to
// `samples` coordinates (all of them when fewer).
void check_gradient(const char* what, std::vector<double>& theta, const std::vector<double>& grad,
                    const std::function<double()>& loss, size_t samples = 40) {
  REQUIRE(grad.size() == theta.size());
  const double h = 1e-5;
  const size_t stride = std::max<size_t>(1, theta.size() / samples);
  double worst = 0;
  for (size_t i = 0; i < theta.size(); i += stride) {
    const double saved = theta[i];
    theta[i] = saved + h;
    const double up = loss();
    theta[i] = saved - h;
    const double down = loss();
    theta[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double err = std::abs(numeric - grad[i]) / std::max(1e-6, std::abs(numeric) + std::abs(grad[i]));
    worst = std::max(worst, err);
  }
  INFO(what << ": worst relative error " << worst);
  CHECK(worst < 1e-6);
}

}  // namespace

TEST_CASE("trainer: dense layer: gradients match finite differences for every activation") {
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kSigmoid}) {
    // Small, and large enough (> 8 MFLOP) that products are split over
    // threads; the last is cut into the small-layer chunks (8 rows forward,
    // 64 input columns backward, both with a partial last chunk).
    for (auto [threads, batch, in, out] : {std::tuple{1, 5, 7, 6}, std::tuple{3, 5, 7, 6}, std::tuple{3, 64, 300, 256},
                                           std::tuple{3, 124, 330, 100}}) {
      CpuOps<double> ops(threads);
      std::mt19937_64 gen(7);
      auto x = random_vector(batch * in, gen), w = random_vector(out * in, gen), b = random_vector(out, gen);
      auto r = random_vector(batch * out, gen);
      std::vector<double> y(batch * out);
      auto loss = [&] {
        ops.dense_forward(batch, in, out, x.data(), w.data(), b.data(), act, y.data());
        return dot(y, r);
      };
      loss();
      std::vector<double> dy = r, dx(x.size()), dw(w.size()), db(b.size());
      ops.dense_backward(batch, in, out, x.data(), w.data(), y.data(), dy.data(), act, dx.data(), dw.data(), db.data());
      check_gradient("dense dx", x, dx, loss);
      check_gradient("dense dw", w, dw, loss);
      check_gradient("dense db", b, db, loss);
    }
  }
}

TEST_CASE("trainer: conv2d layer: gradients match finite differences (1 and several input channels)") {
  struct Case {
    int batch, in_ch, side, out_ch, kernel, pad;
  };
  for (Case c : {Case{3, 1, 6, 4, 5, 2}, Case{4, 3, 5, 5, 3, 1}, Case{2, 8, 4, 3, 5, 2}}) {
    for (Activation act : {Activation::kNone, Activation::kRelu}) {
      for (int threads : {1, 2}) {
        CpuOps<double> ops(threads);
        std::mt19937_64 gen(11);
        Conv2dShape s{c.batch, c.in_ch, c.side, c.side, c.out_ch, c.kernel, c.kernel, c.pad, c.pad};
        const size_t out_size = static_cast<size_t>(c.batch) * c.out_ch * s.out_height() * s.out_width();
        auto x = random_vector(static_cast<size_t>(c.batch) * c.in_ch * c.side * c.side, gen);
        auto w = random_vector(static_cast<size_t>(c.out_ch) * c.in_ch * c.kernel * c.kernel, gen);
        auto b = random_vector(c.out_ch, gen);
        auto r = random_vector(out_size, gen);
        std::vector<double> y(out_size);
        auto loss = [&] {
          ops.conv2d_forward(s, x.data(), w.data(), b.data(), act, y.data());
          return dot(y, r);
        };
        loss();
        std::vector<double> dy = r, dx(x.size()), dw(w.size()), db(b.size());
        ops.conv2d_backward(s, x.data(), w.data(), y.data(), dy.data(), act, dx.data(), dw.data(), db.data());
        check_gradient("conv dx", x, dx, loss);
        check_gradient("conv dw", w, dw, loss);
        check_gradient("conv db", b, db, loss);
      }
    }
  }
}

TEST_CASE("trainer: conv2d forward equals a direct convolution") {
  CpuOps<double> ops(2);
  std::mt19937_64 gen(3);
  Conv2dShape s{2, 3, 6, 6, 4, 5, 5, 2, 2};
  auto x = random_vector(2 * 3 * 36, gen), w = random_vector(4 * 3 * 25, gen), b = random_vector(4, gen);
  std::vector<double> y(2 * 4 * 36);
  ops.conv2d_forward(s, x.data(), w.data(), b.data(), Activation::kNone, y.data());
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 4; ++o)
      for (int oy = 0; oy < 6; ++oy)
        for (int ox = 0; ox < 6; ++ox) {
          double sum = b[o];
          for (int c = 0; c < 3; ++c)
            for (int ky = 0; ky < 5; ++ky)
              for (int kx = 0; kx < 5; ++kx) {
                const int iy = oy + ky - 2, ix = ox + kx - 2;
                if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6) continue;
                sum += w[((o * 3 + c) * 5 + ky) * 5 + kx] * x[((n * 3 + c) * 6 + iy) * 6 + ix];
              }
          CHECK(y[((n * 4 + o) * 6 + oy) * 6 + ox] == doctest::Approx(sum).epsilon(1e-12));
        }
}

TEST_CASE("trainer: exp_vectorizable is within a few float ulps of std::exp and never overflows") {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_vectorizable(x) - exact) / exact);
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 4e-7);  // float's epsilon is 1.19e-7
  CHECK(exp_vectorizable(0.0f) == 1.0f);
  CHECK(std::isfinite(exp_vectorizable(1000.0f)));
  CHECK(exp_vectorizable(-1000.0f) >= 0.0f);
  CHECK(exp_vectorizable(-1000.0f) < 1e-37f);
  CHECK(std::isnan(exp_vectorizable(std::nanf(""))));
  CHECK(sigmoid(-200.0f) >= 0.0f);
  CHECK(sigmoid(200.0f) == 1.0f);
}

TEST_CASE("trainer: maxpool layer: forward picks maxima, gradients match finite differences") {
  for (int window : {2, 3}) {
    CpuOps<double> ops(2);
    std::mt19937_64 gen(5);
    Pool2dShape s{3, 2, 6, 12, window};
    const size_t out = static_cast<size_t>(3 * 2) * (6 / window) * (12 / window);
    auto x = random_vector(3 * 2 * 72, gen);
    auto r = random_vector(out, gen);
    std::vector<double> y(out);
    auto loss = [&] {
      ops.maxpool2d_forward(s, x.data(), y.data());
      return dot(y, r);
    };
    loss();
    double first = x[0];
    for (int dy = 0; dy < window; ++dy)
      for (int dx = 0; dx < window; ++dx) first = std::max(first, x[dy * 12 + dx]);
    CHECK(y[0] == first);
    std::vector<double> dx(x.size());
    ops.maxpool2d_backward(s, x.data(), y.data(), r.data(), dx.data());
    check_gradient("maxpool dx", x, dx, loss, 1000);
  }
}

TEST_CASE("trainer: maxpool routes a tie to the first maximum only") {
  CpuOps<float> ops(1);
  Pool2dShape s{1, 1, 2, 2, 2};
  std::vector<float> x = {1, 3, 3, 2}, y(1), dy = {5}, dx(4, -1);
  ops.maxpool2d_forward(s, x.data(), y.data());
  ops.maxpool2d_backward(s, x.data(), y.data(), dy.data(), dx.data());
  CHECK(dx == std::vector<float>{0, 5, 0, 0});
}

TEST_CASE("trainer: the float 2x2 max pooling is the template's, bit for bit") {
  // The SSE2 kernels (pool_simd.cpp) against the scalar templates on inputs
  // full of ties (values from a set of five), signed zeros and NaN, at row
  // widths with no, a partial and an overlapping last block of four windows.
  std::mt19937_64 gen(23);
  const float values[] = {-1.0f, -0.0f, 0.0f, 2.0f, std::nanf("")};
  std::uniform_int_distribution<int> pick(0, 4), coin(0, 7);
  for (int width : {2, 4, 6, 8, 10, 14, 16, 28}) {
    const int planes = 3, height = 6;
    const size_t in = static_cast<size_t>(planes) * height * width, out = in / 4;
    std::vector<float> x(in), dy(out);
    // Mostly ties among finite values; NaN in about one input in forty.
    for (float& v : x) v = coin(gen) == 0 ? values[pick(gen)] : values[pick(gen) % 4];
    for (float& v : dy) v = static_cast<float>(coin(gen)) - 3.5f;
    std::vector<float> y_simd(out), y_ref(out);
    maxpool_forward(planes, height, width, 2, x.data(), y_simd.data());
    maxpool_forward<float>(planes, height, width, 2, x.data(), y_ref.data());
    INFO("width " << width);
    CHECK(std::memcmp(y_simd.data(), y_ref.data(), out * sizeof(float)) == 0);
    std::vector<float> dx_simd(in, 99.0f), dx_ref(in, -99.0f);
    maxpool_backward(planes, height, width, 2, x.data(), y_ref.data(), dy.data(), dx_simd.data());
    maxpool_backward<float>(planes, height, width, 2, x.data(), y_ref.data(), dy.data(), dx_ref.data());
    CHECK(std::memcmp(dx_simd.data(), dx_ref.data(), in * sizeof(float)) == 0);
    // Fused with the backward of the ReLU whose output x is: the same bits as
    // the pooling's backward followed by activation_backward, in the SSE2
    // kernel, the template, and through CpuOps.
    std::vector<float> fused_simd(in, 99.0f), fused_ref(in, -99.0f), fused_ops(in, 7.0f);
    maxpool_backward(planes, height, width, 2, x.data(), y_ref.data(), dy.data(), fused_simd.data(), true);
    maxpool_backward<float>(planes, height, width, 2, x.data(), y_ref.data(), dy.data(), fused_ref.data(), true);
    CpuOps<float> ops(2);
    ops.maxpool2d_backward(Pool2dShape{1, planes, height, width, 2}, x.data(), y_ref.data(), dy.data(),
                           fused_ops.data(), true);
    std::vector<float> apart = dx_ref;
    activation_backward(in, Activation::kRelu, x.data(), apart.data());
    CHECK(std::memcmp(fused_simd.data(), apart.data(), in * sizeof(float)) == 0);
    CHECK(std::memcmp(fused_ref.data(), apart.data(), in * sizeof(float)) == 0);
    CHECK(std::memcmp(fused_ops.data(), apart.data(), in * sizeof(float)) == 0);
  }
}

TEST_CASE("trainer: softmax cross-entropy: loss, accuracy and gradient") {
  std::mt19937_64 gen(9);
  const int batch = 4, classes = 10;
  auto z = random_vector(batch * classes, gen, 3.0);
  std::vector<int32_t> labels = {3, 0, 9, 5};
  auto loss = [&] {
    double l = 0, correct = 0;
    softmax_cross_entropy<double>(batch, classes, z.data(), labels.data(), 1.0, nullptr, &l, &correct);
    return l;
  };
  // Loss of row 0 by hand: log Σ exp(z) - z[label].
  double denom = 0;
  for (int c = 0; c < classes; ++c) denom += std::exp(z[c]);
  double l0 = 0, correct = 0;
  softmax_cross_entropy<double>(1, classes, z.data(), labels.data(), 1.0, nullptr, &l0, &correct);
  CHECK(l0 == doctest::Approx(std::log(denom) - z[3]).epsilon(1e-12));
  std::vector<double> dz(z.size());
  double l = 0;
  softmax_cross_entropy<double>(batch, classes, z.data(), labels.data(), 1.0, dz.data(), &l, &correct);
  check_gradient("softmax dz", z, dz, loss, 1000);
  // Accuracy: make row 1's label the argmax.
  z[10 + 0] = 100;
  double l2 = 0, c2 = 0;
  softmax_cross_entropy<double>(batch, classes, z.data(), labels.data(), 1.0, nullptr, &l2, &c2);
  CHECK(c2 >= 1);
}

TEST_CASE("trainer: dropout: inverted scaling, keep rate, determinism, gradient") {
  const size_t n = 100000;
  std::vector<double> x(n, 1.0), mask(n), y(n), mask2(n), y2(n);
  dropout_forward<double>(n, 0.25, 42, 7, 0, x.data(), mask.data(), y.data());
  double kept = 0;
  for (size_t i = 0; i < n; ++i) {
    CHECK((mask[i] == 0.0 || mask[i] == doctest::Approx(1.0 / 0.75)));
    kept += mask[i] != 0;
    CHECK(y[i] == mask[i] * x[i]);
  }
  CHECK(kept / n == doctest::Approx(0.75).epsilon(0.01));
  // Same (seed, step, element) → same mask, also for a slice that starts later.
  dropout_forward<double>(n - 1000, 0.25, 42, 7, 1000, x.data(), mask2.data(), y2.data());
  for (size_t i = 0; i < n - 1000; ++i) REQUIRE(mask2[i] == mask[i + 1000]);
  // Another step draws another mask.
  dropout_forward<double>(n, 0.25, 42, 8, 0, x.data(), mask2.data(), y2.data());
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) same += mask2[i] == mask[i];
  CHECK(same < n * 0.7);
}

TEST_CASE("trainer: dropout through the backend: the gradient is the mask, p = 0 is the identity") {
  auto backend = make_cpu_backend(CpuBackendOptions{1});
  StepScalars s;
  s.seed = 5;
  s.step = 3;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, mask(8), y(8), dy = {1, 1, 1, 1, 2, 2, 2, 2}, dx(8);
  REQUIRE(backend->dropout_forward(8, 0.5f, 16, &s, x.data(), mask.data(), y.data()).ok());
  REQUIRE(backend->dropout_backward(8, mask.data(), dy.data(), dx.data()).ok());
  for (int i = 0; i < 8; ++i) {
    const float keep = dropout_uniform(5, 3, 16 + i) >= 0.5f ? 2.0f : 0.0f;
    CHECK(mask[i] == keep);
    CHECK(y[i] == x[i] * keep);  // dy/dx = mask: linear in x
    CHECK(dx[i] == dy[i] * keep);
  }
  REQUIRE(backend->dropout_forward(8, 0.0f, 0, &s, x.data(), mask.data(), y.data()).ok());
  CHECK(y == x);
}

TEST_CASE("trainer: optimizers: updates equal hand-computed values") {
  const double lr = 0.1, wd = 0.01;
  SUBCASE("sgd") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kSgd;
    std::vector<double> p = {1.0, -2.0}, g = {0.5, 0.25};
    optimizer_update<double>(c, wd, lr, 1, 1, 2, p.data(), g.data(), nullptr, nullptr);
    CHECK(p[0] == doctest::Approx(1.0 - 0.1 * (0.5 + 0.01 * 1.0)));
    CHECK(p[1] == doctest::Approx(-2.0 - 0.1 * (0.25 + 0.01 * -2.0)));
  }
  SUBCASE("momentum, two steps") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kMomentum;
    c.momentum = 0.9f;
    std::vector<double> p = {1.0}, g = {0.5}, v = {0.0};
    optimizer_update<double>(c, 0, lr, 1, 1, 1, p.data(), g.data(), v.data(), nullptr);
    CHECK(v[0] == doctest::Approx(0.5));
    CHECK(p[0] == doctest::Approx(0.95));
    optimizer_update<double>(c, 0, lr, 1, 1, 1, p.data(), g.data(), v.data(), nullptr);
    CHECK(v[0] == doctest::Approx(0.9 * 0.5 + 0.5));  // 0.95
    CHECK(p[0] == doctest::Approx(0.95 - 0.1 * 0.95));
  }
  SUBCASE("nesterov momentum, two steps") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kMomentum;
    c.momentum = 0.9f;
    c.nesterov = true;
    std::vector<double> p = {1.0}, g = {0.5}, v = {0.0};
    optimizer_update<double>(c, 0, lr, 1, 1, 1, p.data(), g.data(), v.data(), nullptr);
    CHECK(p[0] == doctest::Approx(1.0 - 0.1 * (0.5 + 0.9 * 0.5)));  // 0.905
    optimizer_update<double>(c, 0, lr, 1, 1, 1, p.data(), g.data(), v.data(), nullptr);
    CHECK(p[0] == doctest::Approx(0.905 - 0.1 * (0.5 + 0.9 * 0.95)));
  }
  SUBCASE("adam, two steps with bias correction and weight decay") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kAdam;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.epsilon = 1e-8f;
    std::vector<double> p = {1.0}, g = {0.5}, m = {0}, v = {0};
    // Step 1: g' = 0.5 + 0.01 = 0.51; m = 0.051; v = 0.00026010; m̂ = 0.51, v̂ = 0.2601
    optimizer_update<double>(c, wd, lr, 1 - 0.9, 1 - 0.999, 1, p.data(), g.data(), m.data(), v.data());
    CHECK(m[0] == doctest::Approx(0.051));
    CHECK(v[0] == doctest::Approx(0.001 * 0.51 * 0.51));
    CHECK(p[0] == doctest::Approx(1.0 - 0.1 * 0.51 / (0.51 + 1e-8)));  // 0.9
    // Step 2 (t = 2): g' = 0.5 + 0.01·p. The config holds float betas.
    const double b1 = 0.9f, b2 = 0.999f;
    const double p1 = p[0], g2 = 0.5 + 0.01 * p1;
    const double m2 = b1 * m[0] + (1 - b1) * g2, v2 = b2 * v[0] + (1 - b2) * g2 * g2;
    const double c1 = 1 - 0.81, c2 = 1 - 0.999 * 0.999;
    optimizer_update<double>(c, wd, lr, c1, c2, 1, p.data(), g.data(), m.data(), v.data());
    CHECK(m[0] == doctest::Approx(m2).epsilon(1e-12));
    CHECK(v[0] == doctest::Approx(v2).epsilon(1e-12));
    CHECK(p[0] == doctest::Approx(p1 - 0.1 * (m2 / c1) / (std::sqrt(v2 / c2) + 1e-8)).epsilon(1e-12));
  }
}

// The float backend at each kernel level against the double reference. The
// loops' level is switched in-process; oneDNN's GEMM level is fixed per
// process, so CTest runs this case again under ONEDNN_MAX_CPU_ISA=SSE41, AVX2
// and AVX512_CORE (trainer/CMakeLists.txt), and the case first checks that
// the level asked for is the level in use.
TEST_CASE("trainer: float kernels at every level agree with the double reference (conv, dense, Adam)") {
  const KernelChoice& choice = kernel_choice();
  MESSAGE("CPU kernels: " << choice.description());
  if (const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA")) {
    const std::string level = cap;
    const bool sse41 = choice.features.find("sse4.1") != std::string::npos;
    const bool supported = level == "AVX512_CORE" ? cpu_supports(SimdLevel::kAvx512)
                           : level == "AVX2"      ? cpu_supports(SimdLevel::kAvx2)
                                                  : sse41;
    if (!supported) {
      MESSAGE("this CPU cannot run kernel level " << level << ": not tested here");
      return;
    }
    std::string expected = level;
    for (char& c : expected) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    CHECK(choice.gemm.find("sgemm " + expected) != std::string::npos);
    CHECK(simd_level() == (level == "AVX512_CORE" ? SimdLevel::kAvx512
                           : level == "AVX2"      ? SimdLevel::kAvx2
                                                  : SimdLevel::kBaseline));
  }
  const SimdLevel chosen = simd_level();
  for (SimdLevel level : {SimdLevel::kBaseline, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (static_cast<int>(level) > static_cast<int>(chosen)) continue;  // above the process's cap
    REQUIRE(set_simd_level_for_testing(level));
    CAPTURE(simd_level_name(level));
    auto backend = make_cpu_backend(CpuBackendOptions{2});
    CpuOps<double> ref(1);
    std::mt19937_64 gen(13);
    {  // conv, ReLU (channels-first and, for 8 input channels, channels-last)
      for (int in_channels : {1, 8}) {
        Conv2dShape s{4, in_channels, 14, 14, 16, 5, 5, 2, 2};
        const size_t xs = 4 * in_channels * 196, ws = 16 * in_channels * 25, ys = 4 * 16 * 196;
        auto xd = random_vector(xs, gen), wd = random_vector(ws, gen, 0.1), bd = random_vector(16, gen),
             rd = random_vector(ys, gen);
        std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end()),
            r(rd.begin(), rd.end());
        std::vector<float> y(ys), dx(xs), dw(ws), db(16);
        std::vector<double> yd(ys), dxd(xs), dwd(ws), dbd(16);
        REQUIRE(backend->conv2d_forward(s, x.data(), w.data(), b.data(), Activation::kRelu, y.data()).ok());
        REQUIRE(backend
                    ->conv2d_backward(s, x.data(), w.data(), y.data(), r.data(), Activation::kRelu, dx.data(),
                                      dw.data(), db.data())
                    .ok());
        ref.conv2d_forward(s, xd.data(), wd.data(), bd.data(), Activation::kRelu, yd.data());
        ref.conv2d_backward(s, xd.data(), wd.data(), yd.data(), rd.data(), Activation::kRelu, dxd.data(), dwd.data(),
                            dbd.data());
        CAPTURE(in_channels);
        CHECK(max_rel(y, yd) < 1e-5);
        CHECK(max_rel(dx, dxd) < 1e-5);
        CHECK(max_rel(dw, dwd) < 1e-5);
        CHECK(max_rel(db, dbd) < 1e-5);
        // The same call again gives the same bits (oneDNN's convolution
        // primitives are deterministic for a fixed configuration).
        std::vector<float> r2(rd.begin(), rd.end()), y2(ys), dx2(xs), dw2(ws), db2(16);
        REQUIRE(backend->conv2d_forward(s, x.data(), w.data(), b.data(), Activation::kRelu, y2.data()).ok());
        REQUIRE(backend
                    ->conv2d_backward(s, x.data(), w.data(), y2.data(), r2.data(), Activation::kRelu, dx2.data(),
                                      dw2.data(), db2.data())
                    .ok());
        CHECK(y2 == y);
        CHECK(dx2 == dx);
        CHECK(dw2 == dw);
        CHECK(db2 == db);
      }
    }
    {  // dense, sigmoid: the MLP's small-product path (100 × 784 → 100)
      const int batch = 100, in = 784, out = 100;
      auto xd = random_vector(size_t{batch} * in, gen), wd = random_vector(size_t{out} * in, gen, 0.05),
           bd = random_vector(out, gen), rd = random_vector(size_t{batch} * out, gen);
      std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end()),
          r(rd.begin(), rd.end());
      std::vector<float> y(rd.size()), dx(xd.size()), dw(wd.size()), db(out);
      std::vector<double> yd(rd.size()), dxd(xd.size()), dwd(wd.size()), dbd(out);
      REQUIRE(backend->dense_forward(batch, in, out, x.data(), w.data(), b.data(), Activation::kSigmoid, y.data()).ok());
      REQUIRE(backend
                  ->dense_backward(batch, in, out, x.data(), w.data(), y.data(), r.data(), Activation::kSigmoid,
                                   dx.data(), dw.data(), db.data())
                  .ok());
      ref.dense_forward(batch, in, out, xd.data(), wd.data(), bd.data(), Activation::kSigmoid, yd.data());
      ref.dense_backward(batch, in, out, xd.data(), wd.data(), yd.data(), rd.data(), Activation::kSigmoid, dxd.data(),
                         dwd.data(), dbd.data());
      CHECK(max_rel(y, yd) < 1e-5);
      CHECK(max_rel(dx, dxd) < 1e-5);
      CHECK(max_rel(dw, dwd) < 1e-5);
      CHECK(max_rel(db, dbd) < 1e-5);
    }
    {  // Adam, two steps
      OptimizerConfig c;
      c.kind = OptimizerKind::kAdam;
      const size_t n = 1000;
      auto pd = random_vector(n, gen), gd = random_vector(n, gen);
      std::vector<double> md(n, 0), vd(n, 0);
      std::vector<float> p(pd.begin(), pd.end()), g(gd.begin(), gd.end()), m(n, 0), v(n, 0);
      for (int t = 1; t <= 2; ++t) {
        const double c1 = 1 - std::pow(0.9, t), c2 = 1 - std::pow(0.999, t);
        // float: the level's version (the non-template overload); double: the template
        optimizer_update(c, 0.01f, 0.001f, static_cast<float>(c1), static_cast<float>(c2), n, p.data(), g.data(),
                         m.data(), v.data());
        cpu::optimizer_update<double>(c, 0.01, 0.001, c1, c2, n, pd.data(), gd.data(), md.data(), vd.data());
      }
      CHECK(max_rel(p, pd) < 1e-5);
      CHECK(max_rel(m, md) < 1e-5);
    }
  }
  REQUIRE(set_simd_level_for_testing(chosen));
}

TEST_CASE("trainer: the direct convolution (few input channels) agrees with the double reference at every level") {
  // conv1 itself (rows of two vectors), rows of one vector, rows narrower
  // than half a vector (a whole-vector store would reach three rows on),
  // no padding, two and three input channels; each activation.
  const std::vector<std::pair<Conv2dShape, Activation>> cases = {
      {{9, 1, 28, 28, 32, 5, 5, 2, 2}, Activation::kRelu},    {{5, 2, 9, 9, 8, 3, 3, 1, 1}, Activation::kSigmoid},
      {{3, 3, 5, 5, 4, 5, 5, 2, 2}, Activation::kRelu},       {{4, 1, 20, 20, 12, 3, 3, 0, 0}, Activation::kNone},
      {{2, 1, 32, 32, 4, 5, 5, 2, 2}, Activation::kRelu},
  };
  const SimdLevel chosen = simd_level();
  for (SimdLevel level : {SimdLevel::kBaseline, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (static_cast<int>(level) > static_cast<int>(chosen)) continue;
    REQUIRE(set_simd_level_for_testing(level));
    CAPTURE(simd_level_name(level));
    std::mt19937_64 gen(29);
    for (const auto& [s, act] : cases) {
      CAPTURE(s.in_channels);
      CAPTURE(s.width);
      CAPTURE(s.kernel_h);
      REQUIRE(conv_direct_supported(s));
      const size_t xs = size_t{1} * s.batch * s.in_channels * s.height * s.width;
      const size_t ws = size_t{1} * s.out_channels * s.in_channels * s.kernel_h * s.kernel_w;
      const size_t ys = size_t{1} * s.batch * s.out_channels * s.out_height() * s.out_width();
      auto xd = random_vector(xs, gen), wd = random_vector(ws, gen, 0.2), bd = random_vector(s.out_channels, gen),
           rd = random_vector(ys, gen);
      std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end()),
          r(rd.begin(), rd.end());
      // Guards around y: the whole-vector stores must stay inside it.
      std::vector<float> y(ys + 32, 7.0f), dw(ws), db(s.out_channels);
      std::vector<double> yd(ys), dwd(ws), dbd(s.out_channels);
      CpuOps<float> ops(2);
      CpuOps<double> ref(1);
      ops.conv2d_forward(s, x.data(), w.data(), b.data(), act, y.data());
      ref.conv2d_forward(s, xd.data(), wd.data(), bd.data(), act, yd.data());
      for (size_t i = ys; i < y.size(); ++i) REQUIRE(y[i] == 7.0f);
      y.resize(ys);
      CHECK(max_rel(y, yd) < 1e-5);
      ops.conv2d_backward(s, x.data(), w.data(), y.data(), r.data(), act, nullptr, dw.data(), db.data());
      ref.conv2d_backward(s, xd.data(), wd.data(), yd.data(), rd.data(), act, nullptr, dwd.data(), dbd.data());
      CHECK(max_rel(dw, dwd) < 1e-5);
      CHECK(max_rel(db, dbd) < 1e-5);
    }
  }
  REQUIRE(set_simd_level_for_testing(chosen));
  // Shapes it does not take fall back to im2col (and still agree: the test above).
  CHECK_FALSE(conv_direct_supported({1, 1, 28, 28, 6, 5, 5, 2, 2}));   // channels not a multiple of 4
  CHECK_FALSE(conv_direct_supported({1, 1, 40, 40, 8, 5, 5, 2, 2}));   // rows of more than 32
  CHECK_FALSE(conv_direct_supported({1, 1, 28, 28, 8, 7, 7, 3, 3}));   // 7x7
  CHECK_FALSE(conv_direct_supported({1, 4, 28, 28, 8, 5, 5, 2, 2}));   // channels-last from 4 on
}

namespace {
// nChw16c (per sample [C/16][H][W][16]) to NCHW and back.
std::vector<float> blocked_to_nchw(const std::vector<float>& b, int n, int c, int hw) {
  std::vector<float> out(b.size());
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < hw; ++p)
        out[(static_cast<size_t>(i) * c + ch) * hw + p] = b[((static_cast<size_t>(i) * (c / 16) + ch / 16) * hw + p) * 16 + ch % 16];
  return out;
}
std::vector<float> nchw_to_blocked(const std::vector<float>& a, int n, int c, int hw) {
  std::vector<float> out(a.size());
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < hw; ++p)
        out[((static_cast<size_t>(i) * (c / 16) + ch / 16) * hw + p) * 16 + ch % 16] = a[(static_cast<size_t>(i) * c + ch) * hw + p];
  return out;
}
}  // namespace

TEST_CASE("trainer: a convolution's channel-blocked output and its pooling agree with the NCHW path") {
  Conv2dShape s{20, 32, 14, 14, 64, 5, 5, 2, 2};  // conv2 at a batch that leaves a short sub-batch
  CpuOps<float> ops(2);
  if (!ops.blocked_conv_output(s, Activation::kRelu)) {
    // oneDNN keeps 16-channel blocks for AVX-512; elsewhere the model never asks.
    MESSAGE("oneDNN does not run this convolution channel-blocked on this CPU: only the NCHW path is used here");
    CHECK_FALSE(cpu_supports(SimdLevel::kAvx512));
    return;
  }
  CHECK(ops.blocked_conv_output(s, Activation::kNone));
  CHECK_FALSE(ops.blocked_conv_output(s, Activation::kSigmoid));
  CHECK_FALSE(CpuOps<float>(2, /*onednn_convolutions=*/false).blocked_conv_output(s, Activation::kRelu));
  std::mt19937_64 gen(41);
  auto floats = [&](size_t n, double scale) {
    auto d = random_vector(n, gen, scale);
    return std::vector<float>(d.begin(), d.end());
  };
  const int hw = 196, phw = 49;
  const size_t xs = 20 * 32 * hw, ws = 64 * 32 * 25, ys = 20 * 64 * hw, ps = 20 * 64 * phw;
  auto x = floats(xs, 1), w = floats(ws, 0.05), b = floats(64, 0.1), dp = floats(ps, 1);
  // Forward: the blocked convolution (bias and ReLU inside oneDNN) against
  // the NCHW one.
  std::vector<float> y(ys), yb(ys);
  ops.conv2d_forward(s, x.data(), w.data(), b.data(), Activation::kRelu, y.data());
  Conv2dShape sb = s;
  sb.blocked_out = true;
  REQUIRE(ops.conv2d_forward_blocked(sb, x.data(), w.data(), b.data(), Activation::kRelu, yb.data()));
  const std::vector<float> yb_nchw = blocked_to_nchw(yb, 20, 64, hw);
  CHECK(max_rel(yb_nchw, y) < 1e-5);
  // Ties and a NaN inside windows, so the pooling's routing rules are used.
  std::vector<float> xp = yb_nchw;
  for (size_t i = 0; i < xp.size(); i += 7) xp[i] = std::round(xp[i] * 2) / 2;
  xp[5 * hw + 30] = std::nanf("");
  xp[9 * hw + 31] = -0.0f;
  const std::vector<float> xp_blocked = nchw_to_blocked(xp, 20, 64, hw);
  // Pooling: the same bits as the NCHW kernels on the same values.
  Pool2dShape p{20, 64, 14, 14, 2};
  Pool2dShape pb = p;
  pb.blocked_in = true;
  std::vector<float> pooled(ps), pooled_b(ps);
  ops.maxpool2d_forward(p, xp.data(), pooled.data());
  ops.maxpool2d_forward_blocked(pb, xp_blocked.data(), pooled_b.data());
  CHECK(std::memcmp(pooled.data(), pooled_b.data(), ps * sizeof(float)) == 0);
  for (bool relu : {false, true}) {
    CAPTURE(relu);
    std::vector<float> dx(ys), dxb(ys);
    ops.maxpool2d_backward(p, xp.data(), pooled.data(), dp.data(), dx.data(), relu);
    ops.maxpool2d_backward_blocked(pb, xp_blocked.data(), pooled.data(), dp.data(), dxb.data(), relu);
    const std::vector<float> dxb_nchw = blocked_to_nchw(dxb, 20, 64, hw);
    CHECK(std::memcmp(dx.data(), dxb_nchw.data(), ys * sizeof(float)) == 0);
  }
  // Backward of the convolution from a blocked dy against the NCHW one.
  auto dyv = floats(ys, 1);
  std::vector<float> dy = dyv, dyb = nchw_to_blocked(dyv, 20, 64, hw);
  std::vector<float> dx(xs), dw(ws), db(64), dxb(xs), dwb(ws), dbb(64);
  ops.conv2d_backward(s, x.data(), w.data(), y.data(), dy.data(), Activation::kNone, dx.data(), dw.data(), db.data());
  REQUIRE(ops.conv2d_backward_blocked(sb, x.data(), w.data(), yb.data(), dyb.data(), Activation::kNone, dxb.data(),
                                      dwb.data(), dbb.data()));
  CHECK(max_rel(dxb, dx) < 1e-5);
  CHECK(max_rel(dwb, dw) < 1e-5);
  CHECK(max_rel(dbb, db) < 1e-5);
  // The same calls again give the same bits.
  std::vector<float> dyb2 = nchw_to_blocked(dyv, 20, 64, hw), dxb2(xs), dwb2(ws), dbb2(64);
  REQUIRE(ops.conv2d_backward_blocked(sb, x.data(), w.data(), yb.data(), dyb2.data(), Activation::kNone, dxb2.data(),
                                      dwb2.data(), dbb2.data()));
  CHECK(dxb2 == dxb);
  CHECK(dwb2 == dwb);
  CHECK(dbb2 == dbb);
}
