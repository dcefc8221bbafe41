#include "realexec/trainjob/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "realexec/trainjob/rng.h"

namespace faultline::live::trainjob {
namespace {

// Stream tags keep the teacher, the initial weights and the data independent.
constexpr std::uint64_t kStreamTeacher = 0x7465616368657231ull;
constexpr std::uint64_t kStreamInit = 0x696E697469616C31ull;
constexpr std::uint64_t kStreamData = 0x6461746173657431ull;

std::vector<double> uniform_block(std::uint64_t seed, std::uint64_t stream, std::uint64_t block,
                                  std::size_t n, double scale) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = scale * to_symmetric_unit(counter_hash(seed, stream, block, i));
  }
  return v;
}

}  // namespace

std::size_t ModelShape::param_count() const {
  const auto h = static_cast<std::size_t>(hidden);
  const auto in = static_cast<std::size_t>(input_dim);
  const auto out = static_cast<std::size_t>(output_dim);
  return h * in + h + out * h + out;
}

TrainState init_state(std::uint64_t seed, const ModelShape& shape) {
  TrainState s;
  s.weights.assign(shape.param_count(), 0.0);
  s.momentum.assign(shape.param_count(), 0.0);
  const std::size_t n1 = static_cast<std::size_t>(shape.hidden) * shape.input_dim;
  const std::size_t n2 = static_cast<std::size_t>(shape.output_dim) * shape.hidden;
  const auto w1 = uniform_block(seed, kStreamInit, 1, n1, 1.0 / std::sqrt(shape.input_dim));
  const auto w2 = uniform_block(seed, kStreamInit, 2, n2, 1.0 / std::sqrt(shape.hidden));
  std::copy(w1.begin(), w1.end(), s.weights.begin());
  std::copy(w2.begin(), w2.end(), s.weights.begin() + n1 + shape.hidden);
  return s;
}

Task::Task(std::uint64_t seed, const ModelShape& shape) : seed_(seed), shape_(shape) {
  const auto in = static_cast<std::size_t>(shape.input_dim);
  const auto out = static_cast<std::size_t>(shape.output_dim);
  const auto th = static_cast<std::size_t>(kTeacherHidden);
  teacher_w1_ = uniform_block(seed, kStreamTeacher, 1, th * in, 2.0 / std::sqrt(shape.input_dim));
  teacher_b1_ = uniform_block(seed, kStreamTeacher, 2, th, 0.5);
  teacher_w2_ = uniform_block(seed, kStreamTeacher, 3, out * th, 1.0 / std::sqrt(kTeacherHidden));
  teacher_b2_ = uniform_block(seed, kStreamTeacher, 4, out, 0.1);
}

double Task::teacher_output(std::span<const double> x, int o) const {
  const int in = shape_.input_dim;
  double y = teacher_b2_[o];
  for (int j = 0; j < kTeacherHidden; ++j) {
    double a = teacher_b1_[j];
    for (int i = 0; i < in; ++i) a += teacher_w1_[j * in + i] * x[i];
    y += teacher_w2_[o * kTeacherHidden + j] * std::tanh(a);
  }
  return y;
}

void Task::microbatch_contribution(std::span<const double> weights, std::int64_t step,
                                   int microbatch, std::span<double> contribution) const {
  const int in = shape_.input_dim;
  const int hid = shape_.hidden;
  const int out = shape_.output_dim;
  const int batch = shape_.samples_per_microbatch;
  const double* w1 = weights.data();
  const double* b1 = w1 + hid * in;
  const double* w2 = b1 + hid;
  const double* b2 = w2 + out * hid;
  double* g_w1 = contribution.data();
  double* g_b1 = g_w1 + hid * in;
  double* g_w2 = g_b1 + hid;
  double* g_b2 = g_w2 + out * hid;
  std::fill(contribution.begin(), contribution.end(), 0.0);

  std::vector<double> x(in), h(hid), dy(out), dh(hid);
  const double norm = 1.0 / (static_cast<double>(batch) * out);
  double loss = 0;
  for (int s = 0; s < batch; ++s) {
    for (int i = 0; i < in; ++i) {
      x[i] = to_symmetric_unit(counter_hash(seed_, kStreamData, static_cast<std::uint64_t>(step),
                                            static_cast<std::uint64_t>(microbatch),
                                            static_cast<std::uint64_t>(s * in + i)));
    }
    for (int j = 0; j < hid; ++j) {
      double a = b1[j];
      for (int i = 0; i < in; ++i) a += w1[j * in + i] * x[i];
      h[j] = std::tanh(a);
    }
    for (int o = 0; o < out; ++o) {
      double y = b2[o];
      for (int j = 0; j < hid; ++j) y += w2[o * hid + j] * h[j];
      const double err = y - teacher_output(x, o);
      loss += err * err * norm;
      dy[o] = 2.0 * err * norm;
    }
    for (int j = 0; j < hid; ++j) dh[j] = 0;
    for (int o = 0; o < out; ++o) {
      g_b2[o] += dy[o];
      for (int j = 0; j < hid; ++j) {
        g_w2[o * hid + j] += dy[o] * h[j];
        dh[j] += w2[o * hid + j] * dy[o];
      }
    }
    for (int j = 0; j < hid; ++j) {
      const double da = dh[j] * (1.0 - h[j] * h[j]);
      g_b1[j] += da;
      for (int i = 0; i < in; ++i) g_w1[j * in + i] += da * x[i];
    }
  }
  contribution[shape_.param_count()] = loss;
}

StepOutcome apply_step(std::span<const double> gathered, int microbatches, TrainState& state) {
  const std::size_t n = state.weights.size();
  const std::size_t stride = n + 1;
  std::vector<double> grad(gathered.begin(), gathered.begin() + n);
  double loss = gathered[n];
  for (int m = 1; m < microbatches; ++m) {
    const double* c = gathered.data() + m * stride;
    for (std::size_t i = 0; i < n; ++i) grad[i] += c[i];
    loss += c[n];
  }
  const double inv = 1.0 / microbatches;
  double sq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    grad[i] *= inv;
    sq += grad[i] * grad[i];
    state.momentum[i] = kMomentum * state.momentum[i] + grad[i];
    state.weights[i] -= kLearningRate * state.momentum[i];
  }
  ++state.step;
  return StepOutcome{loss * inv, std::sqrt(sq)};
}

std::string state_hash(const TrainState& state) {
  Fnv1a h;
  h.update(state.weights.data(), state.weights.size() * sizeof(double));
  h.update(state.momentum.data(), state.momentum.size() * sizeof(double));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.value()));
  return buf;
}

}  // namespace faultline::live::trainjob
