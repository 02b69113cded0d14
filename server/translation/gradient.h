// The gradient family: dp_gd (full batch), dp_sgd (Poisson-sampled
// minibatches) and the non-private gd (public datasets only), all in
// core/optim itself (dp_sgd.h, non_private_gd.h).
#ifndef DPOPT_SERVER_TRANSLATION_GRADIENT_H_
#define DPOPT_SERVER_TRANSLATION_GRADIENT_H_

#include "server/translation/job_family.h"

namespace dpopt::server {

const JobFamily& GradientFamily();

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_GRADIENT_H_
