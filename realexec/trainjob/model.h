#pragma once

// The model and data of the reference training job: a 2-layer tanh MLP (the student) learning
// to imitate a fixed random teacher MLP on synthetic inputs, trained with SGD + momentum.
//
// Everything is a pure function of the seed: inputs come from counter_hash(seed, step,
// micro-batch, index), the teacher and the student's initial weights from their own streams.
// The gradient of one micro-batch is computed in a fixed order in double precision, so the same
// (weights, step, micro-batch) gives the same bits in any process. A step's global gradient is
// the sum of the micro-batch gradients taken in micro-batch index order (see collective.h for
// why the all-reduce is an all-gather followed by this ordered sum), which makes the whole
// trajectory independent of how micro-batches are spread over ranks.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace faultline::live::trainjob {

constexpr double kLearningRate = 0.05;
constexpr double kMomentum = 0.9;
constexpr int kTeacherHidden = 16;

struct ModelShape {
  int input_dim = 16;
  int hidden = 32;
  int output_dim = 4;
  int samples_per_microbatch = 16;

  // Parameters in the flat layout W1 [hidden x input], b1 [hidden], W2 [output x hidden],
  // b2 [output].
  std::size_t param_count() const;
  // One micro-batch's contribution as exchanged by the collective: its gradient followed by its
  // loss, so one all-gather carries both.
  std::size_t contribution_size() const { return param_count() + 1; }
};

// What a checkpoint holds: the number of completed steps and the optimiser state.
struct TrainState {
  std::int64_t step = 0;
  std::vector<double> weights;
  std::vector<double> momentum;
};

// The student's initial state (step 0) for `seed`.
TrainState init_state(std::uint64_t seed, const ModelShape& shape);

// The synthetic regression task for one seed: the teacher and the input generator.
class Task {
 public:
  Task(std::uint64_t seed, const ModelShape& shape);

  const ModelShape& shape() const { return shape_; }

  // Writes the mean-squared-error gradient of micro-batch `microbatch` of step `step` (1-based)
  // at `weights` into contribution[0, param_count) and its loss into contribution[param_count].
  // Requires weights.size() == param_count and contribution.size() == contribution_size.
  void microbatch_contribution(std::span<const double> weights, std::int64_t step, int microbatch,
                               std::span<double> contribution) const;

 private:
  double teacher_output(std::span<const double> x, int o) const;

  std::uint64_t seed_;
  ModelShape shape_;
  std::vector<double> teacher_w1_, teacher_b1_, teacher_w2_, teacher_b2_;
};

struct StepOutcome {
  double loss = 0;       // mean of the micro-batch losses
  double grad_norm = 0;  // L2 norm of the mean gradient
};

// Sums the `microbatches` contributions laid out back to back in `gathered` in index order,
// averages them, applies one SGD + momentum update to `state` and advances state.step.
StepOutcome apply_step(std::span<const double> gathered, int microbatches, TrainState& state);

// Hex FNV-1a of the weights and momentum bits: equal hashes mean bit-identical states.
std::string state_hash(const TrainState& state);

}  // namespace faultline::live::trainjob
