// The web console's pages, rendered server-side as HTML
// fragments with inline SVG plots.
//
// Every page is built ONLY from replies of the public gRPC API, called over
// the server's in-process channel with the browser's own bearer token as
// call metadata: authentication, roles, dataset visibility, job ownership
// and auditing are those of the gRPC handlers (server/services.cc,
// server/auth.h), not a second copy of the policy. The console therefore
// shows exactly what the API releases to the caller, nothing more.
#ifndef DPOPT_SERVER_CONSOLE_PAGES_H_
#define DPOPT_SERVER_CONSOLE_PAGES_H_

#include <memory>
#include <string>

#include "dpopt/v1/dpopt.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::server::console {

struct Page {
  int http_status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
};

class Pages {
 public:
  // `api`: a channel to the gRPC services (the in-process channel).
  explicit Pages(std::shared_ptr<grpc::Channel> api);

  // `authorization` is the HTTP Authorization header ("Bearer ID.SECRET"),
  // forwarded verbatim as gRPC metadata (empty if absent or not printable
  // ASCII: the API then answers UNAUTHENTICATED).
  Page WhoAmI(const std::string& authorization);  // JSON {name, role}
  Page Datasets(const std::string& authorization);
  Page Dataset(const std::string& authorization, const std::string& name);
  Page Ledger(const std::string& authorization, const std::string& dataset);
  Page Jobs(const std::string& authorization);
  Page Job(const std::string& authorization, const std::string& id);

 private:
  std::unique_ptr<grpc::ClientContext> Context(
      const std::string& authorization) const;

  std::unique_ptr<v1::DatasetService::Stub> datasets_;
  std::unique_ptr<v1::BudgetService::Stub> budget_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

// HTTP status for a gRPC status (401, 403, 404, 400, 429, 503, 500).
int HttpStatus(grpc::StatusCode code);

}  // namespace dpopt::server::console

#endif  // DPOPT_SERVER_CONSOLE_PAGES_H_
