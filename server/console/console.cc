#include "server/console/console.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "httplib.h"
#include "server/console/assets.h"
#include "server/console/pages.h"
#include "server/server.h"

namespace dpopt::server::console {
namespace {

constexpr char kCsp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'";

void SecurityHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy", kCsp);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-store");
}

void Serve(httplib::Response& res, const Page& page) {
  res.status = page.http_status;
  res.set_content(page.body, page.content_type.c_str());
}

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(
    const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--console_listen must be HOST:PORT, got ", listen));
  }
  absl::string_view host(listen.data(), colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  int port = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535 || host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--console_listen must be HOST:PORT, got ", listen));
  }
  return std::make_pair(std::string(host), port);
}

}  // namespace

absl::Status ConsoleOptions::Validate() const {
  if (listen.empty()) return absl::InvalidArgumentError("no console address");
  if (absl::StartsWith(listen, "unix")) {
    return absl::InvalidArgumentError("the console listens on TCP only");
  }
  if (auto hp = SplitHostPort(listen); !hp.ok()) return hp.status();
  if (tls_cert.empty() != tls_key.empty()) {
    return absl::InvalidArgumentError(
        "the console's TLS needs both a certificate and a key");
  }
  if (tls_cert.empty() && !insecure && !IsLoopbackAddress(listen)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to serve the console on ", listen,
        " without TLS: bearer tokens would cross the network in clear text. "
        "Give --tls-cert and --tls-key, listen on 127.0.0.1, or pass "
        "--insecure if a trusted proxy terminates TLS"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Console>> Console::Start(
    const ConsoleOptions& options, std::shared_ptr<grpc::Channel> api) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  auto hp = SplitHostPort(options.listen);
  if (!hp.ok()) return hp.status();
  std::unique_ptr<Console> c(new Console());
  c->pages_ = std::make_unique<Pages>(std::move(api));
  if (!options.tls_cert.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(),
        options.tls_client_ca.empty() ? nullptr
                                      : options.tls_client_ca.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(
          "the console cannot load its TLS certificate, key or client CA");
    }
    c->http_ = std::move(ssl);
    c->tls_ = true;
  } else {
    c->http_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *c->http_;
  http.set_payload_max_length(64 << 10);  // read-only: GET requests only
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);
  http.set_keep_alive_max_count(100);

  Pages* pages = c->pages_.get();
  auto shell = [](const httplib::Request&, httplib::Response& res) {
    SecurityHeaders(res);
    res.set_content(kShellHtml, "text/html; charset=utf-8");
  };
  auto auth = [](const httplib::Request& req) {
    return req.get_header_value("Authorization");
  };
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_redirect("/console/");
  });
  http.Get("/console", [](const httplib::Request&, httplib::Response& res) {
    res.set_redirect("/console/");
  });
  http.Get("/console/", shell);
  http.Get("/console/jobs", shell);
  http.Get(R"(/console/(jobs|datasets|ledger)/[^/]+)", shell);
  http.Get("/console/login",
           [](const httplib::Request&, httplib::Response& res) {
             SecurityHeaders(res);
             res.set_content(kLoginHtml, "text/html; charset=utf-8");
           });
  http.Get("/console/static/console.js",
           [](const httplib::Request&, httplib::Response& res) {
             SecurityHeaders(res);
             res.set_content(kConsoleJs, "text/javascript; charset=utf-8");
           });
  http.Get("/console/static/console.css",
           [](const httplib::Request&, httplib::Response& res) {
             SecurityHeaders(res);
             res.set_content(kConsoleCss, "text/css; charset=utf-8");
           });
  http.Get("/console/api/whoami",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             SecurityHeaders(res);
             Serve(res, pages->WhoAmI(auth(req)));
           });
  http.Get("/console/api/datasets",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             SecurityHeaders(res);
             Serve(res, pages->Datasets(auth(req)));
           });
  http.Get(R"(/console/api/datasets/([^/]+))",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             SecurityHeaders(res);
             Serve(res, pages->Dataset(auth(req), req.matches[1]));
           });
  http.Get(R"(/console/api/ledger/([^/]+))",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             SecurityHeaders(res);
             Serve(res, pages->Ledger(auth(req), req.matches[1]));
           });
  http.Get("/console/api/jobs",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             SecurityHeaders(res);
             Serve(res, pages->Jobs(auth(req)));
           });
  http.Get(R"(/console/api/jobs/([^/]+))",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             SecurityHeaders(res);
             Serve(res, pages->Job(auth(req), req.matches[1]));
           });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      SecurityHeaders(res);
      res.set_content(absl::StrCat("HTTP ", res.status), "text/plain");
    }
  });

  const auto& [host, port] = *hp;
  if (port == 0) {
    c->port_ = http.bind_to_any_port(host);
  } else {
    c->port_ = http.bind_to_port(host, port) ? port : -1;
  }
  if (c->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("the console cannot listen on ", options.listen,
                     " (address in use or invalid?)"));
  }
  httplib::Server* server = c->http_.get();
  c->thread_ = std::thread([server] { server->listen_after_bind(); });
  return c;
}

Console::~Console() { Stop(); }

void Console::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace dpopt::server::console
