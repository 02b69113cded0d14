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

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/token_lifetime.h"
#include "storage/access_store.h"
#include "storage/database.h"

namespace dpopt::server {

struct Caller {
  std::string name;
  storage::Role role = storage::Role::kAnalyst;
  std::string token_id;  // public id of the token used (never the secret)
  // The principal's own limits (unset: the server's).
  storage::PrincipalLimitOverrides limits;
  bool curator() const { return role == storage::Role::kCurator; }
};

struct IssuedToken {
  storage::TokenRecord record;  // secret_sha256 cleared
  std::string token;            // "ID.SECRET", to be shown once
};

class Authenticator {
 public:
  // REQUIRES: db outlives the authenticator.
  explicit Authenticator(storage::Database* db,
                         TokenLifetimeOptions lifetime = {})
      : db_(db), lifetime_(lifetime) {}

  // The lifetime in seconds (0 = never expires) of a token for a principal
  // of `role` asked with `requested_ttl_seconds` (0 = the default) and
  // `no_expiry`. INVALID_ARGUMENT, naming the server flag, when the request
  // is longer than the maximum or asks an analyst token never to expire on
  // a server with a maximum; curators may hold tokens that never expire.
  absl::StatusOr<int64_t> Lifetime(storage::Role role,
                                   int64_t requested_ttl_seconds,
                                   bool no_expiry) const;

  // `authorization` is the metadata value ("Bearer ID.SECRET").
  // UNAUTHENTICATED for a missing, malformed, unknown, revoked or expired
  // token or a revoked principal (one message for all, naming no secret).
  absl::StatusOr<Caller> Authenticate(absl::string_view authorization) const;

  // A fresh token for `principal`; ttl_seconds 0 = never expires (callers
  // decide the lifetime with Lifetime()).
  absl::StatusOr<IssuedToken> Issue(const std::string& principal,
                                    int64_t ttl_seconds,
                                    const std::string& label) const;

  // First start on a database without principals: creates the curator
  // "curator" and writes its token to `token_file` (mode 0600, created
  // exclusively). Does nothing when principals exist. Returns whether a
  // token was written. The bootstrap token does not expire; replace it with
  // RotateBootstrapToken (dpopt-server rotate-curator-token).
  absl::StatusOr<bool> Bootstrap(const std::string& token_file) const;

  struct Rotation {
    std::string new_token_id;
    std::vector<std::string> revoked_token_ids;
  };
  // Replaces the bootstrap curator's token: issues a new one (never
  // expires, label "rotated"), writes it to `token_file` (0600, written to
  // a temporary file, synced and renamed over the old one), then revokes
  // the token the file held before and every other unrevoked token of the
  // bootstrap curator labelled "bootstrap" or "rotated" (tokens the curator
  // created with their own labels are kept). Audited. Run with the server
  // stopped (the caller holds the database's lock).
  absl::StatusOr<Rotation> RotateBootstrapToken(
      const std::string& token_file) const;

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
  TokenLifetimeOptions lifetime_;
};

// SHA-256 of `data` (32 raw bytes), via OpenSSL.
std::string Sha256(absl::string_view data);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_AUTH_H_
