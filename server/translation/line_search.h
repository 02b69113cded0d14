// The line-search family (core/optim/line_search): dp_blsgd, dp_blsgd_ac,
// dp_blgd, all from one DpBacktrackingLineSearch message.
#ifndef DPOPT_SERVER_TRANSLATION_LINE_SEARCH_H_
#define DPOPT_SERVER_TRANSLATION_LINE_SEARCH_H_

#include "server/translation/job_family.h"

namespace dpopt::server {

const JobFamily& LineSearchFamily();

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_LINE_SEARCH_H_
