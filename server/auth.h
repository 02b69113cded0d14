// Authentication and the access policy (docs/architecture.md, "Security
// model"): one
// component every RPC handler calls first (services.cc); a test calls every
// method of every service without a token and expects UNAUTHENTICATED.
//
// Tokens are "ID.SECRET": ID is 16 hex digits (public, names the token),
// SECRET is 64 hex digits = 256 bits from the secure generator. Only
// SHA-256(SECRET) is stored; it is compared in constant time
// (CRYPTO_memcmp). Tokens and secrets are never logged nor put in errors.
#ifndef DPOPT_SERVER_AUTH_H_
#define DPOPT_SERVER_AUTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/access_store.h"
#include "storage/database.h"

namespace dpopt::server {

struct Caller {
  std::string name;
  storage::Role role = storage::Role::kAnalyst;
  std::string token_id;  // public id of the token used (never the secret)
  bool curator() const { return role == storage::Role::kCurator; }
};

struct IssuedToken {
  storage::TokenRecord record;  // secret_sha256 cleared
  std::string token;            // "ID.SECRET", to be shown once
};

class Authenticator {
 public:
  // REQUIRES: db outlives the authenticator.
  explicit Authenticator(storage::Database* db) : db_(db) {}

  // `authorization` is the metadata value ("Bearer ID.SECRET").
  // UNAUTHENTICATED for a missing, malformed, unknown, revoked or expired
  // token or a revoked principal (one message for all, naming no secret).
  absl::StatusOr<Caller> Authenticate(absl::string_view authorization) const;

  // A fresh token for `principal`; ttl_seconds 0 = never expires.
  absl::StatusOr<IssuedToken> Issue(const std::string& principal,
                                    int64_t ttl_seconds,
                                    const std::string& label) const;

  // First start on a database without principals: creates the curator
  // "curator" and writes its token to `token_file` (mode 0600, created
  // exclusively). Does nothing when principals exist. Returns whether a
  // token was written.
  absl::StatusOr<bool> Bootstrap(const std::string& token_file) const;

  // Access policy. OK for curators (managers report missing datasets); for
  // analysts NOT_FOUND (same message as a missing dataset) unless the
  // dataset exists, is not deleted, and is public or granted to them,
  // decided by one indexed query (storage::AccessStore::DatasetVisibleTo)
  // before anything about the dataset is loaded. Job admission re-checks
  // the grant inside its transaction (storage::ChargeRequest::
  // require_grant).
  absl::Status CheckDatasetVisible(const Caller& caller,
                                   const std::string& dataset) const;
  // PERMISSION_DENIED unless the caller is a curator.
  static absl::Status RequireCurator(const Caller& caller,
                                     absl::string_view what);

 private:
  storage::Database* db_;
};

// SHA-256 of `data` (32 raw bytes), via OpenSSL.
std::string Sha256(absl::string_view data);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_AUTH_H_
