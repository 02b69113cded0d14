#include "server/request_limits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/common/status_macros.h"
#include "google/protobuf/descriptor.h"

namespace dpopt::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

absl::Status CheckString(const FieldDescriptor& field, const std::string& path,
                         absl::string_view value) {
  if (field.type() == FieldDescriptor::TYPE_BYTES) return absl::OkStatus();
  const std::string& name = field.name();
  size_t limit = kMaxTextBytes;
  bool id = false;
  if (name == "name" || name == "dataset" || name == "principal" ||
      name == "evaluate_on" || name == "feature_names" || name == "dummy_for") {
    limit = kMaxNameBytes;
  } else if (name == "id" || name == "job_id") {
    limit = kMaxIdBytes;
    id = true;
  } else if (name == "page_token") {
    limit = kMaxPageTokenBytes;
  }
  if (value.size() > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("request field ", path, " is ", value.size(),
                     " bytes long; the limit is ", limit, " bytes"));
  }
  if (id) {
    for (char c : value) {
      if (!IsIdChar(c)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request field ", path,
            " is not an id (ids are letters, digits, '-', '_' and '.')"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMessage(const Message& m, const std::string& prefix) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string path =
        prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (f->is_repeated()) {
        const int n = r->FieldSize(m, f);
        for (int i = 0; i < n; ++i) {
          std::string scratch;
          RETURN_IF_ERROR(
              CheckString(*f, absl::StrCat(path, "[", i, "]"),
                          r->GetRepeatedStringReference(m, f, i, &scratch)));
        }
      } else {
        std::string scratch;
        RETURN_IF_ERROR(
            CheckString(*f, path, r->GetStringReference(m, f, &scratch)));
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        const int n = r->FieldSize(m, f);
        for (int i = 0; i < n; ++i) {
          RETURN_IF_ERROR(CheckMessage(r->GetRepeatedMessage(m, f, i),
                                       absl::StrCat(path, "[", i, "]")));
        }
      } else {
        RETURN_IF_ERROR(CheckMessage(r->GetMessage(m, f), path));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRequestLimits(const Message& request,
                                size_t max_message_bytes) {
  if (max_message_bytes > 0) {
    const size_t size = request.ByteSizeLong();
    if (size > max_message_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the request is ", size, " bytes; the limit for ",
                       request.GetDescriptor()->name(), " is ",
                       max_message_bytes, " bytes"));
    }
  }
  return CheckMessage(request, "");
}

}  // namespace dpopt::server
