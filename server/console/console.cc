#include "server/console/console.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
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

// Sent with every response: pages, API replies, redirects, errors and the
// listener's own refusals of malformed requests.
httplib::Headers SecurityHeaders(bool tls) {
  httplib::Headers h = {
      {"Content-Security-Policy", kCsp},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Cache-Control", "no-store"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
      {"Cross-Origin-Resource-Policy", "same-origin"},
  };
  if (tls) h.emplace("Strict-Transport-Security", "max-age=31536000");
  return h;
}

int Seconds(absl::Duration d, int64_t* usec) {
  const int64_t total = absl::ToInt64Microseconds(d);
  *usec = total % 1000000;
  return static_cast<int>(total / 1000000);
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
        "--console-insecure if a trusted proxy terminates TLS"));
  }
  if (worker_threads < 1 || worker_threads > 256 ||
      max_queued_connections < 0 || max_queued_connections > 4096) {
    return absl::InvalidArgumentError(
        "console: worker_threads must be in [1, 256] and "
        "max_queued_connections in [0, 4096]");
  }
  for (absl::Duration d : {read_timeout, write_timeout, keep_alive_timeout}) {
    if (d < absl::Milliseconds(10) || d > absl::Minutes(10)) {
      return absl::InvalidArgumentError(
          "console: timeouts must be in [10 ms, 10 min]");
    }
  }
  if (keep_alive_max_requests < 1) {
    return absl::InvalidArgumentError(
        "console: keep_alive_max_requests must be >= 1");
  }
  return absl::OkStatus();
}

// httplib's connection queue with a bound: enqueue() (called by the
// listener thread for each accepted connection) waits while worker_threads
// connections are being served and max_queued wait, so the listener stops
// accepting; the kernel's backlog holds the rest. Once stopping, it runs the
// connection on the caller's thread instead of waiting (the read timeout
// bounds it), so the listener can exit.
class Console::BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(int threads, int max_queued) : max_queued_(max_queued) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~BoundedTaskQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      absl::MutexLock lock(&mu_);
      auto room = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || static_cast<int>(jobs_.size()) < max_queued_ ||
               (max_queued_ == 0 && idle_ > 0 && jobs_.empty());
      };
      mu_.Await(absl::Condition(&room));
      if (!stopping_) {
        jobs_.push_back(std::move(fn));
        return;
      }
    }
    fn();
  }

  // Stops waiting for room (before httplib::Server::stop).
  void BeginStop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }

  void shutdown() override {
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) return;
      stopping_ = true;
      shut_down_ = true;
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        ++idle_;
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return !jobs_.empty() || shut_down_;
        };
        mu_.Await(absl::Condition(&ready));
        --idle_;
        if (jobs_.empty()) return;  // shut down and drained
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  const int max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// What httplib owns (it deletes its task queue when its listener exits):
// a forwarder to the console's queue, which lives as long as the console.
class QueueRef final : public httplib::TaskQueue {
 public:
  explicit QueueRef(httplib::TaskQueue* queue) : queue_(queue) {}
  void enqueue(std::function<void()> fn) override {
    queue_->enqueue(std::move(fn));
  }
  void shutdown() override { queue_->shutdown(); }

 private:
  httplib::TaskQueue* queue_;
};

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
  int64_t usec = 0;
  int sec = Seconds(options.read_timeout, &usec);
  http.set_read_timeout(sec, usec);
  sec = Seconds(options.write_timeout, &usec);
  http.set_write_timeout(sec, usec);
  http.set_keep_alive_timeout(static_cast<time_t>(
      std::max<int64_t>(1, absl::ToInt64Seconds(options.keep_alive_timeout))));
  http.set_keep_alive_max_count(options.keep_alive_max_requests);
  http.set_default_headers(SecurityHeaders(c->tls_));
  c->queue_ = std::make_unique<BoundedTaskQueue>(
      options.worker_threads, options.max_queued_connections);
  httplib::TaskQueue* queue = c->queue_.get();
  http.new_task_queue = [queue] { return new QueueRef(queue); };

  Pages* pages = c->pages_.get();
  auto shell = [](const httplib::Request&, httplib::Response& res) {
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
             res.set_content(kLoginHtml, "text/html; charset=utf-8");
           });
  http.Get("/console/static/console.js",
           [](const httplib::Request&, httplib::Response& res) {
             res.set_content(kConsoleJs, "text/javascript; charset=utf-8");
           });
  http.Get("/console/static/console.css",
           [](const httplib::Request&, httplib::Response& res) {
             res.set_content(kConsoleCss, "text/css; charset=utf-8");
           });
  http.Get("/console/api/whoami",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             Serve(res, pages->WhoAmI(auth(req)));
           });
  http.Get("/console/api/datasets",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             Serve(res, pages->Datasets(auth(req)));
           });
  http.Get(R"(/console/api/datasets/([^/]+))",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             Serve(res, pages->Dataset(auth(req), req.matches[1]));
           });
  http.Get(R"(/console/api/ledger/([^/]+))",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             Serve(res, pages->Ledger(auth(req), req.matches[1]));
           });
  http.Get("/console/api/jobs",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             Serve(res, pages->Jobs(auth(req)));
           });
  http.Get(R"(/console/api/jobs/([^/]+))",
           [pages, auth](const httplib::Request& req, httplib::Response& res) {
             Serve(res, pages->Job(auth(req), req.matches[1]));
           });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
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
  if (queue_ != nullptr) queue_->BeginStop();
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
  if (queue_ != nullptr) queue_->shutdown();
}

}  // namespace dpopt::server::console
