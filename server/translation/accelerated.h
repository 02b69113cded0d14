// The accelerated family (core/optim/accelerated): accel_dp_gd, accel_dp_hb,
// accel_dp_nag, accel_dp_nag_opt, accel_dp_masg, accel_dp_masg_opt.
#ifndef DPOPT_SERVER_TRANSLATION_ACCELERATED_H_
#define DPOPT_SERVER_TRANSLATION_ACCELERATED_H_

#include "server/translation/job_family.h"

namespace dpopt::server {

const JobFamily& AcceleratedFamily();

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_ACCELERATED_H_
