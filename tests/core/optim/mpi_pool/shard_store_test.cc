#include "core/optim/mpi_pool/shard_store.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "core/common/status_macros.h"
#include "core/optim/distributed_dda/wire.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::mpi_pool {
namespace {

using ::dpopt::testing::StatusIs;

std::string TempDir() {
  std::string dir = ::testing::TempDir() + "shard_store_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

Dataset Rows() {
  Eigen::MatrixXd x(5, 3);
  x << 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15;
  Eigen::VectorXd y(5);
  y << 1, -1, 1, -1, 1;
  return Dataset::Dense(x, y, LabelKind::kBinary);
}

// Writes `bytes` in pieces of 7 and commits.
absl::StatusOr<int64_t> Place(ShardStore& store, const std::string& id,
                              const std::string& bytes, int64_t dimension) {
  RETURN_IF_ERROR(store.BeginWrite(id));
  for (size_t i = 0; i < bytes.size(); i += 7) {
    RETURN_IF_ERROR(store.Append(id, bytes.substr(i, 7)));
  }
  return store.Commit(id, dimension);
}

TEST(ShardStoreTest, StoresLoadsAndSecurelyDeletesAShard) {
  ASSERT_OK_AND_ASSIGN(ShardStore store, ShardStore::Open(TempDir() + "/r0"));
  struct stat st;
  ASSERT_EQ(stat(store.dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const Dataset data = Rows();
  ASSERT_OK_AND_ASSIGN(
      int64_t rows, Place(store, "d1", distributed_dda::EncodeShard(data), 3));
  EXPECT_EQ(rows, 5);
  const std::string file = store.dir() + "/d1.shard";
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(store.dir() + "/d1.partial"));
  ASSERT_OK_AND_ASSIGN(Dataset back, store.Load("d1"));
  EXPECT_EQ(back.rows(), 5);
  EXPECT_EQ(back.labels(), data.labels());
  EXPECT_EQ(back.dense_rows(), data.dense_rows());
  ASSERT_OK_AND_ASSIGN(bool existed, store.SecureDelete("d1"));
  EXPECT_TRUE(existed);
  EXPECT_FALSE(std::filesystem::exists(file));
  ASSERT_OK_AND_ASSIGN(existed, store.SecureDelete("d1"));
  EXPECT_FALSE(existed);
  EXPECT_THAT(store.Load("d1").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST(ShardStoreTest, ACorruptOrMismatchedShardIsRefusedAndTheOldOneKept) {
  ASSERT_OK_AND_ASSIGN(ShardStore store, ShardStore::Open(TempDir() + "/r0"));
  const std::string good = distributed_dda::EncodeShard(Rows());
  ASSERT_OK(Place(store, "d1", good, 3).status());
  std::string corrupt = good;
  corrupt[60] ^= 0x10;  // a label's bit
  EXPECT_THAT(Place(store, "d1", corrupt, 3).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(Place(store, "d1", good.substr(0, good.size() - 3), 3).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(Place(store, "d1", good, 4).status(),  // wrong dimension
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_FALSE(std::filesystem::exists(store.dir() + "/d1.partial"));
  ASSERT_OK_AND_ASSIGN(Dataset back, store.Load("d1"));  // the old one
  EXPECT_EQ(back.rows(), 5);
}

TEST(ShardStoreTest, RefusesAStoreOthersCanRead) {
  const std::string dir = TempDir() + "/open";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  EXPECT_THAT(ShardStore::Open(dir).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(ShardStoreTest, RefusesIdsThatAreNotFileNames) {
  ASSERT_OK_AND_ASSIGN(ShardStore store, ShardStore::Open(TempDir() + "/r0"));
  EXPECT_THAT(store.BeginWrite("../x"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store.Load("a/b").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::optim::mpi_pool
