// libFuzzer target: proto3-JSON JobSpec parsing (as the CLI and every JSON
// client send it) plus the server's validation and translation of the spec.
// Any refusal must be INVALID_ARGUMENT or PERMISSION_DENIED with a message;
// nothing may crash, hang or trip a sanitizer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "dpopt/v1/job_spec.pb.h"
#include "google/protobuf/util/json_util.h"
#include "server/spec_translation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool is_public = data[0] & 1;
  const int num_classes = 2 + (data[0] >> 1) % 4;
  const std::string json(reinterpret_cast<const char*>(data + 1), size - 1);
  dpopt::v1::JobSpec spec;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = false;
  if (!google::protobuf::util::JsonStringToMessage(json, &spec, o).ok()) {
    return 0;
  }
  absl::StatusOr<dpopt::server::TranslatedJob> job =
      dpopt::server::TranslateJobSpec(spec, is_public, num_classes);
  if (!job.ok()) {
    const absl::StatusCode c = job.status().code();
    if ((c != absl::StatusCode::kInvalidArgument &&
         c != absl::StatusCode::kPermissionDenied) ||
        job.status().message().empty()) {
      std::abort();
    }
  } else if (job->algorithm == nullptr) {
    std::abort();
  }
  return 0;
}
