// Test helpers that reach into a test server's database directly: an SQL
// statement, and making a dataset's stored rows unreadable (the tests that
// check a job never loads them: dry runs, worker-pool jobs).
#ifndef DPOPT_TESTS_INTEGRATION_STORED_ROWS_H_
#define DPOPT_TESTS_INTEGRATION_STORED_ROWS_H_

#include <sqlite3.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {

inline void Sql(const std::string& db, const std::string& statement) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  sqlite3_busy_timeout(raw, 5000);
  char* error = nullptr;
  const int rc = sqlite3_exec(raw, statement.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error != nullptr ? error : "");
  sqlite3_free(error);
  sqlite3_close(raw);
}

// Empties every stored label blob of the named dataset: any load of its
// rows fails (DATA_LOSS), while its public metadata and, for a max-affine
// problem, its public slopes stay readable.
inline void MakeRowsUnreadable(TestServer& server, const std::string& dataset) {
  Sql(server.db_path(),
      absl::StrCat("UPDATE dataset_blocks SET labels = x'' WHERE dataset_id = "
                   "(SELECT id FROM datasets WHERE name = '",
                   dataset, "')"));
}

}  // namespace dpopt::testing

#endif  // DPOPT_TESTS_INTEGRATION_STORED_ROWS_H_
