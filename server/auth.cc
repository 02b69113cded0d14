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
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "core/noise/random.h"
#include "openssl/crypto.h"
#include "openssl/sha.h"

namespace dpopt::server {
namespace {

constexpr absl::string_view kBearer = "Bearer ";
constexpr size_t kIdHex = 16;
constexpr size_t kSecretHex = 64;

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
  return Caller{principal.name, principal.role, tok.id};
}

absl::StatusOr<IssuedToken> Authenticator::Issue(
    const std::string& principal, int64_t ttl_seconds,
    const std::string& label) const {
  if (ttl_seconds < 0 || ttl_seconds > int64_t{100} * 365 * 86400) {
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
      db_->access().CreatePrincipal("curator", storage::Role::kCurator);
  if (!created.ok()) return fail(created.status());
  auto issued = Issue("curator", 0, "bootstrap");
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

}  // namespace dpopt::server
