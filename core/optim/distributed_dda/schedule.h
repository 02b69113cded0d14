// Weights, prox weights and the primal map of distributed-DDA family (Liu,
// Johansson & Shi 2023, eq. (6) and Sec. 5).
//
// Schedules (both non-decreasing, as Theorem 2 needs):
//   a_t = 1 (kUniform) or t (kLinear); A_t = sum_{tau <= t} a_tau;
//   gamma_t = gamma * t^gamma_power, gamma >= 0, gamma_power in [0, 1].
// Strongly convex theory (Cor. 3.2) a_t = t, gamma_t = 0; the l2-SVM
// experiments a_t = t, gamma_t = 20; general convex a_t = 1,
// gamma_t = gamma sqrt(t) (experiments gamma = 0.01).
//
// Primal map (eq. (6)) with d(x) = 1/2 ||x||^2 and h(x) = (mu/2) ||x||^2 +
// phi ||x||_1 (mu = the model's l2, phi = its l1):
//   PRIMAL(z, A, gamma) = argmin <z, x> + iota A h(x) + gamma d(x)
//                       = -soft(z, iota A phi) / (iota mu A + gamma),
// soft(z, k)_i = sign(z_i) max(|z_i| - k, 0). Well posed iff
// iota mu A_t + gamma_t > 0 for every t >= 1.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_SCHEDULE_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_SCHEDULE_H_

#include <cstdint>

#include "Eigen/Dense"
#include "absl/status/status.h"

namespace dpopt::optim::distributed_dda {

enum class WeightSchedule { kUniform, kLinear };

struct ScheduleOptions {
  WeightSchedule weights = WeightSchedule::kLinear;
  double gamma = 0;
  double gamma_power = 0;
  // gamma >= 0 finite, gamma_power in [0, 1].
  absl::Status Validate() const;
};

struct Regularizer {
  double mu = 0;   // l2 modulus (h has (mu/2) ||x||^2)
  double phi = 0;  // l1 weight
};

class Schedule {
 public:
  explicit Schedule(const ScheduleOptions& options) : options_(options) {}
  // REQUIRES: t >= 1.
  double a(int64_t t) const;
  // A_t (A_0 = 0).
  double A(int64_t t) const;
  double gamma(int64_t t) const;
  // INVALID_ARGUMENT unless iota mu A_t + gamma_t > 0 for all t >= 1 (an l1
  // term needs gamma > 0 or mu > 0 likewise).
  absl::Status CheckWellPosed(const Regularizer& h, double iota) const;

 private:
  ScheduleOptions options_;
};

// *x = PRIMAL(z, A, gamma) for the regularizer h with node-sampling ratio
// iota (uses iota * A). REQUIRES: iota * h.mu * A + gamma > 0.
void PrimalMap(const Eigen::VectorXd& z, double iota_a, double gamma,
               const Regularizer& h, Eigen::VectorXd* x);

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_SCHEDULE_H_
