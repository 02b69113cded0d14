#include "server/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "core/noise/random.h"
#include "openssl/crypto.h"
#include "openssl/sha.h"
#include "storage/file_util.h"

namespace dpopt::server {
namespace {

constexpr absl::string_view kBearer = "Bearer ";
constexpr char kBootstrapCurator[] = "curator";
constexpr size_t kIdHex = 16;
constexpr size_t kSecretHex = 64;
constexpr int64_t kMaxTtlSeconds = int64_t{36500} * 86400;  // 100 years

absl::Status Unauthenticated() {
  return absl::UnauthenticatedError(
      "missing, invalid, revoked or expired token: send metadata "
      "'authorization: Bearer TOKEN' (dpopt: $DPOPT_TOKEN or --token-file)");
}

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::StatusOr<std::string> RandomHex(noise::RandomSource& rng,
                                      size_t hex_digits) {
  std::string out;
  while (out.size() < hex_digits) {
    absl::StrAppendFormat(&out, "%016x", rng.NextUint64());
  }
  RETURN_IF_ERROR(rng.status());
  out.resize(hex_digits);
  return out;
}

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace

std::string Sha256(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

absl::StatusOr<Caller> Authenticator::Authenticate(
    absl::string_view authorization) const {
  if (!absl::StartsWith(authorization, kBearer)) return Unauthenticated();
  const absl::string_view token =
      absl::StripAsciiWhitespace(authorization.substr(kBearer.size()));
  if (token.size() != kIdHex + 1 + kSecretHex || token[kIdHex] != '.') {
    return Unauthenticated();
  }
  const absl::string_view id = token.substr(0, kIdHex);
  const absl::string_view secret = token.substr(kIdHex + 1);
  if (!IsLowerHex(id) || !IsLowerHex(secret)) return Unauthenticated();
  auto found = db_->access().LookupToken(id);
  if (!found.ok()) {
    if (absl::IsNotFound(found.status())) return Unauthenticated();
    return absl::UnavailableError("could not check the token; retry");
  }
  const auto& [tok, principal] = *found;
  const std::string hash = Sha256(secret);
  const bool match =
      tok.secret_sha256.size() == hash.size() &&
      CRYPTO_memcmp(tok.secret_sha256.data(), hash.data(), hash.size()) == 0;
  const int64_t now = NowMicros();
  if (!match || tok.revoked_at_micros != 0 ||
      principal.revoked_at_micros != 0 ||
      (tok.expires_at_micros != 0 && now >= tok.expires_at_micros)) {
    return Unauthenticated();
  }
  return Caller{principal.name, principal.role, tok.id, principal.limits};
}

absl::Status TokenLifetimeOptions::Validate() const {
  if (max_ttl_seconds < 0 || max_ttl_seconds > kMaxTtlSeconds) {
    return absl::InvalidArgumentError(
        "--max-token-ttl-days must be in [0, 36500] (0 = no maximum)");
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Authenticator::Lifetime(storage::Role role,
                                                int64_t requested_ttl_seconds,
                                                bool no_expiry) const {
  const int64_t max = lifetime_.max_ttl_seconds;
  const std::string limit =
      max == 0 ? std::string()
               : absl::StrCat(max / 86400.0, " days (dpopt-server ",
                              "--max-token-ttl-days)");
  if (requested_ttl_seconds < 0 || requested_ttl_seconds > kMaxTtlSeconds) {
    return absl::InvalidArgumentError(
        "token lifetime must be in [0, 100 years] seconds (0 = the server's "
        "default)");
  }
  if (no_expiry) {
    if (requested_ttl_seconds != 0) {
      return absl::InvalidArgumentError(
          "a token either expires after its lifetime or never (no expiry): "
          "give one of the two");
    }
    if (role != storage::Role::kCurator && max != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "analyst tokens on this server expire after at most ", limit,
          "; only curator tokens may be created without expiry"));
    }
    return 0;
  }
  if (requested_ttl_seconds == 0) return max;
  if (max != 0 && requested_ttl_seconds > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("token lifetime of ", requested_ttl_seconds,
                     " s is longer than this server's maximum of ", limit));
  }
  return requested_ttl_seconds;
}

absl::StatusOr<IssuedToken> Authenticator::Issue(
    const std::string& principal, int64_t ttl_seconds,
    const std::string& label) const {
  if (ttl_seconds < 0 || ttl_seconds > kMaxTtlSeconds) {
    return absl::InvalidArgumentError(
        "token lifetime must be 0 (never expires) or up to 100 years");
  }
  if (label.size() > 200) {
    return absl::InvalidArgumentError("token label is longer than 200");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<noise::RandomSource> rng,
                   noise::NewSecureRandom());
  ASSIGN_OR_RETURN(std::string id, RandomHex(*rng, kIdHex));
  ASSIGN_OR_RETURN(std::string secret, RandomHex(*rng, kSecretHex));
  IssuedToken out;
  out.record.id = id;
  out.record.principal = principal;
  out.record.secret_sha256 = Sha256(secret);
  out.record.label = label;
  out.record.created_at_micros = NowMicros();
  out.record.expires_at_micros =
      ttl_seconds == 0 ? 0
                       : out.record.created_at_micros + ttl_seconds * 1000000;
  RETURN_IF_ERROR(db_->access().InsertToken(out.record));
  out.record.secret_sha256.clear();
  out.token = absl::StrCat(id, ".", secret);
  return out;
}

absl::StatusOr<bool> Authenticator::Bootstrap(
    const std::string& token_file) const {
  ASSIGN_OR_RETURN(int64_t count, db_->access().CountPrincipals());
  if (count > 0) return false;
  if (token_file.empty()) {
    return absl::InvalidArgumentError("a curator token file path is needed");
  }
  // Create the file first (exclusively, 0600), so a token is never issued
  // that cannot be handed to the curator.
  const int fd =
      ::open(token_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create the curator token file ", token_file, ": ",
        std::strerror(errno),
        errno == EEXIST ? " (remove a stale file from an old database)" : ""));
  }
  auto fail = [&](absl::Status s) {
    ::close(fd);
    ::unlink(token_file.c_str());
    return s;
  };
  auto created =
      db_->access().CreatePrincipal(kBootstrapCurator, storage::Role::kCurator);
  if (!created.ok()) return fail(created.status());
  auto issued = Issue(kBootstrapCurator, 0, "bootstrap");
  if (!issued.ok()) return fail(issued.status());
  const std::string line = issued->token + "\n";
  if (::write(fd, line.data(), line.size()) !=
          static_cast<ssize_t>(line.size()) ||
      ::fsync(fd) != 0) {
    return fail(absl::InternalError("cannot write the curator token file"));
  }
  ::close(fd);
  return true;
}

absl::Status Authenticator::CheckDatasetVisible(
    const Caller& caller, const std::string& dataset) const {
  // Curators see everything, including deleted datasets' ledgers (the
  // managers report a missing dataset themselves).
  if (caller.curator()) return absl::OkStatus();
  // One indexed query decides, before anything about the dataset is
  // loaded: a dataset the analyst may not see takes the same path, and the
  // same time, as a missing one.
  ASSIGN_OR_RETURN(bool visible,
                   db_->access().DatasetVisibleTo(caller.name, dataset));
  if (visible) return absl::OkStatus();
  // Exactly the message of a missing dataset (storage/dataset_store.cc):
  // no existence leak.
  return absl::NotFoundError(
      absl::StrCat("dataset \"", dataset, "\" not found"));
}

absl::Status Authenticator::RequireCurator(const Caller& caller,
                                           absl::string_view what) {
  if (caller.curator()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      what, " is for curators; \"", caller.name, "\" is an analyst"));
}

absl::StatusOr<Authenticator::Rotation> Authenticator::RotateBootstrapToken(
    const std::string& token_file) const {
  if (token_file.empty()) {
    return absl::InvalidArgumentError("a curator token file path is needed");
  }
  ASSIGN_OR_RETURN(storage::PrincipalRecord curator,
                   db_->access().GetPrincipal(kBootstrapCurator));
  if (curator.revoked_at_micros != 0 ||
      curator.role != storage::Role::kCurator) {
    return absl::FailedPreconditionError(
        "the bootstrap curator \"curator\" is revoked or no longer a "
        "curator: ask another curator for a token instead");
  }
  // The token the file holds now, if it is readable (only its public id is
  // kept).
  std::string old_id;
  if (absl::StatusOr<std::string> old = storage::ReadSmallFile(token_file);
      old.ok()) {
    const absl::string_view t = absl::StripAsciiWhitespace(*old);
    if (t.size() > kIdHex && t[kIdHex] == '.')
      old_id = std::string(t.substr(0, kIdHex));
  }
  ASSIGN_OR_RETURN(IssuedToken issued, Issue(curator.name, 0, "rotated"));
  RETURN_IF_ERROR(storage::WriteFileDurably(token_file, issued.token + "\n"));
  Rotation out;
  out.new_token_id = issued.record.id;
  ASSIGN_OR_RETURN(std::vector<storage::TokenRecord> tokens,
                   db_->access().ListTokens(curator.name));
  for (const storage::TokenRecord& t : tokens) {
    if (t.id == out.new_token_id || t.revoked_at_micros != 0) continue;
    if (t.id != old_id && t.label != "bootstrap" && t.label != "rotated") {
      continue;
    }
    RETURN_IF_ERROR(db_->access().RevokeToken(t.id).status());
    out.revoked_token_ids.push_back(t.id);
  }
  storage::AuditRecord audit;
  audit.at_micros = NowMicros();
  audit.principal = "(dpopt-server rotate-curator-token)";
  audit.method = "rotate-curator-token";
  audit.target = out.new_token_id;
  audit.detail = absl::StrCat("new bootstrap curator token ", out.new_token_id,
                              "; revoked ", out.revoked_token_ids.size(), ": ",
                              absl::StrJoin(out.revoked_token_ids, ","));
  RETURN_IF_ERROR(db_->access().AppendAudit(audit));
  return out;
}

}  // namespace dpopt::server
