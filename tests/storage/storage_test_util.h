// Test helpers for storage/: temporary database files, raw SQL access
// (DatabaseTestPeer, a friend of Database) and file reading.
#ifndef DPOPT_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
#define DPOPT_TESTS_STORAGE_STORAGE_TEST_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/dataset_import.h"
#include "storage/sqlite.h"

namespace dpopt::storage {

// Raw SQL on a Database's own connection, for tests that must bypass the
// store APIs (e.g. to prove the ledger triggers refuse UPDATE/DELETE).
class DatabaseTestPeer {
 public:
  static absl::Status Execute(Database& db, absl::string_view sql) {
    return db.WithConnection(
        [&](Connection& conn) { return conn.Execute(sql); });
  }
  // fn(Connection&) on the Database's connection, under its lock.
  template <typename Fn>
  static auto WithConnection(Database& db, Fn&& fn) {
    return db.WithConnection(std::forward<Fn>(fn));
  }
  // First column of the first row of `sql`, as int64.
  static absl::StatusOr<int64_t> QueryInt(Database& db, absl::string_view sql) {
    return db.WithConnection([&](Connection& conn) -> absl::StatusOr<int64_t> {
      absl::StatusOr<Statement> st = conn.Prepare(sql);
      if (!st.ok()) return st.status();
      absl::StatusOr<bool> row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::NotFoundError("no row");
      return st->ColumnInt64(0);
    });
  }
};

namespace testing {

// A fresh directory under TEST_TMPDIR (or /tmp), removed at destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TEST_TMPDIR");
    std::string tmpl =
        std::string(base != nullptr ? base : "/tmp") + "/dpopt_storage_XXXXXX";
    char* made = mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(absl::string_view name) const {
    return path_ + "/" + std::string(name);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// $DPOPT_SOURCE_DIR (set by ctest), else the source dir baked in at build
// time.
inline std::string SourceDir() {
  const char* dir = getenv("DPOPT_SOURCE_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
#ifdef DPOPT_TEST_SOURCE_DIR
  return DPOPT_TEST_SOURCE_DIR;
#else
  return ".";
#endif
}

// Import options of a private LIBSVM / CSV dataset (budget 3, 1e-6).
inline ImportOptions Libsvm(const std::string& name, int64_t dimension) {
  ImportOptions o;
  o.name = name;
  o.format = DatasetFormat::kLibsvm;
  o.dimension = dimension;
  o.epsilon_budget = 3;
  o.delta_budget = 1e-6;
  return o;
}
inline ImportOptions Csv(const std::string& name, int64_t dimension) {
  ImportOptions o = Libsvm(name, dimension);
  o.format = DatasetFormat::kCsv;
  return o;
}

}  // namespace testing
}  // namespace dpopt::storage

#endif  // DPOPT_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
