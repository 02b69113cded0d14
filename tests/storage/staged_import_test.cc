// Streaming import: DatasetParser (chunks in, bounded blocks out)
// and StagedImport (blocks stored in short transactions, invisible until the
// final commit, removed without a trace on error, discard or crash).
#include "storage/staged_import.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/dataset_import.h"
#include "storage/dataset_store.h"
#include "storage/ledger.h"
#include "storage/sqlite.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::dpopt::storage::testing::Csv;
using ::dpopt::storage::testing::Libsvm;

// The blocks a parser produces, concatenated back into one ParsedRows.
struct Collected {
  std::vector<int64_t> block_rows;
  ParsedRows all;
};

absl::StatusOr<Collected> ParseInChunks(
    const ImportOptions& options, const std::string& file,
    const std::vector<size_t>& cuts,
    DatasetParser::BlockLimits limits = DatasetParser::BlockLimits()) {
  Collected c;
  c.all.sparse = options.format == DatasetFormat::kLibsvm;
  c.all.dimension = options.dimension;
  if (c.all.sparse) c.all.row_offsets.push_back(0);
  auto sink = [&c](ParsedRows& b) -> absl::Status {
    c.block_rows.push_back(b.rows);
    const int64_t base = c.all.sparse ? c.all.row_offsets.back() : 0;
    for (size_t i = 1; i < b.row_offsets.size(); ++i) {
      c.all.row_offsets.push_back(base + b.row_offsets[i]);
    }
    c.all.labels.insert(c.all.labels.end(), b.labels.begin(), b.labels.end());
    c.all.indices.insert(c.all.indices.end(), b.indices.begin(),
                         b.indices.end());
    c.all.values.insert(c.all.values.end(), b.values.begin(), b.values.end());
    c.all.rows += b.rows;
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<DatasetParser>> parser =
      DatasetParser::Create(options, limits, sink);
  if (!parser.ok()) return parser.status();
  size_t pos = 0;
  for (size_t cut : cuts) {
    if (cut < pos || cut > file.size()) continue;
    absl::Status s =
        (*parser)->Feed(absl::string_view(file).substr(pos, cut - pos));
    if (!s.ok()) return s;
    pos = cut;
  }
  absl::Status s = (*parser)->Feed(absl::string_view(file).substr(pos));
  if (!s.ok()) return s;
  s = (*parser)->Finish();
  if (!s.ok()) return s;
  if ((*parser)->rows() != c.all.rows ||
      (*parser)->nonzeros() != c.all.nonzeros()) {
    return absl::InternalError("rows()/nonzeros() disagree with the blocks");
  }
  c.all.header_names = (*parser)->header_names();
  return c;
}

std::vector<size_t> EveryNBytes(size_t n, size_t size) {
  std::vector<size_t> cuts;
  for (size_t p = n; p < size; p += n) cuts.push_back(p);
  return cuts;
}

void ExpectSameRows(const ParsedRows& a, const ParsedRows& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.sparse, b.sparse);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.row_offsets, b.row_offsets);
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.header_names, b.header_names);
}

// ------------------------------------------------------------ the parser

TEST(DatasetParserTest, AnySplitOfTheFileGivesTheSameRows) {
  ImportOptions header_csv = Csv("c", 3);
  header_csv.csv_has_header = true;
  header_csv.csv_label_column = 0;
  ImportOptions ws_csv = Csv("w", 2);
  ws_csv.csv_delimiter = CsvDelimiter::kWhitespace;
  const std::vector<std::pair<ImportOptions, std::string>> files = {
      {Libsvm("s", 5),
       "1 1:0.5 3:-2\r\n\n-1 2:1e-3 5:7\n  \n1\n1.0e0 4:3.25\n-1 1:1 2:2 3:3 "
       "4:4 5:5"},
      {header_csv, "y,a,b,c\n1,0.1,0.2,0.3\r\n\n-1,1,2,3\n1,-4,5e2,6\n"},
      {ws_csv, "1 2\t-1\n\t3   4 1\n5 6 -1\n"},
  };
  for (const auto& [options, file] : files) {
    SCOPED_TRACE(options.name);
    ASSERT_OK_AND_ASSIGN(ParsedRows whole, ParseDatasetFile(options, file));
    ASSERT_GT(whole.rows, 2);
    for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}}) {
      SCOPED_TRACE(n);
      ASSERT_OK_AND_ASSIGN(
          Collected c,
          ParseInChunks(options, file, EveryNBytes(n, file.size())));
      ExpectSameRows(c.all, whole);
    }
    // Empty chunks change nothing either.
    ASSERT_OK_AND_ASSIGN(Collected c,
                         ParseInChunks(options, file, {0, 0, 5, 5, 9}));
    ExpectSameRows(c.all, whole);
  }
}

TEST(DatasetParserTest, BlocksEndAtTheRowOrValueLimit) {
  std::string file;
  for (int i = 0; i < 10; ++i)
    absl::StrAppend(&file, i, ",", -i, ",", i % 2 ? 1 : -1, "\n");
  DatasetParser::BlockLimits by_rows;
  by_rows.max_rows = 3;
  ASSERT_OK_AND_ASSIGN(Collected r,
                       ParseInChunks(Csv("c", 2), file, {}, by_rows));
  EXPECT_THAT(r.block_rows, ElementsAre(3, 3, 3, 1));
  // Two values per row: a block closes once it holds >= 5 values (3 rows).
  DatasetParser::BlockLimits by_values;
  by_values.max_values = 5;
  ASSERT_OK_AND_ASSIGN(Collected v,
                       ParseInChunks(Csv("c", 2), file, {}, by_values));
  EXPECT_THAT(v.block_rows, ElementsAre(3, 3, 3, 1));
  ASSERT_OK_AND_ASSIGN(ParsedRows whole, ParseDatasetFile(Csv("c", 2), file));
  ExpectSameRows(r.all, whole);
  ExpectSameRows(v.all, whole);
}

TEST(DatasetParserTest, LineNumbersCountAcrossChunks) {
  const std::string file = "1 1:1\n\n-1 2:1\n1 3:1\n1 9:1\n";
  for (size_t n : {size_t{1}, size_t{4}, size_t{100}}) {
    EXPECT_THAT(ParseInChunks(Libsvm("s", 3), file, EveryNBytes(n, file.size()))
                    .status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("line 5: feature index 9 exceeds")))
        << n;
  }
}

TEST(DatasetParserTest, OverlongLineIsRefusedWithBoundedMemory) {
  DatasetParser::BlockLimits limits;
  limits.max_line_bytes = 16;
  const std::string ok_line = "1 1:0.25 2:0.5\n";  // 15 bytes with '\n'
  ASSERT_OK(ParseInChunks(Libsvm("s", 3), ok_line + ok_line, {3, 20}, limits)
                .status());
  const std::string file = ok_line + "1 1:0.25 2:0.5 3:0.75\n" + ok_line;
  for (size_t n : {size_t{1}, size_t{5}, file.size()}) {
    EXPECT_THAT(
        ParseInChunks(Libsvm("s", 3), file, EveryNBytes(n, file.size()), limits)
            .status(),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr("line 2: line is too long")))
        << n;
  }
  // A last line without newline counts too.
  EXPECT_THAT(
      ParseInChunks(Libsvm("s", 3), ok_line + std::string(20, '1'), {}, limits)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("line 2: line is too long")));
}

TEST(DatasetParserTest, ErrorsAreStickyAndStopTheSink) {
  int blocks = 0;
  DatasetParser::BlockLimits one_row;
  one_row.max_rows = 1;
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DatasetParser> parser,
      DatasetParser::Create(Libsvm("s", 3), one_row, [&](ParsedRows&) {
        ++blocks;
        return absl::OkStatus();
      }));
  ASSERT_OK(parser->Feed("1 1:1\n"));
  EXPECT_EQ(blocks, 1);
  EXPECT_THAT(
      parser->Feed("1 1:x\n1 2:1\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2")));
  EXPECT_THAT(
      parser->Feed("1 2:1\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2")));
  EXPECT_THAT(parser->Finish(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("line 2")));
  EXPECT_EQ(blocks, 1);
}

TEST(DatasetParserTest, SinkErrorStopsTheParse) {
  DatasetParser::BlockLimits one_row;
  one_row.max_rows = 1;
  int calls = 0;
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DatasetParser> parser,
      DatasetParser::Create(Libsvm("s", 3), one_row, [&](ParsedRows&) {
        return ++calls == 2 ? absl::UnavailableError("disk full")
                            : absl::OkStatus();
      }));
  EXPECT_THAT(parser->Feed("1 1:1\n1 1:1\n1 1:1\n"),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(calls, 2);
  EXPECT_THAT(parser->Finish(), StatusIs(absl::StatusCode::kUnavailable));
}

// The parser's number fast path (fast_float) must accept exactly what
// absl::SimpleAtod accepts, with bit-identical values.
TEST(DatasetParserTest, NumbersParseExactlyAsSimpleAtod) {
  std::vector<std::string> tokens = {
      "0", "-0", "+1.5", "1.", ".5", "-.5", "1e5", "1E5", "1e+5", "00012",
      "0x10", "1e400", "-1e400", "1e-400", "4.9e-324",
      "2.2250738585072011e-308", "1.7976931348623157e308",
      "1.7976931348623159e308", "nan", "inf", "-Infinity", "1e", "1.2.3", "--1",
      "0.1000000000000000055511151231257827021181583404541015625",
      "123456789012345678901234567890", "9007199254740993", "1e-2147483649",
      "1e2147483648", "1e99999999999999999999",
      "0.00000000000000000000000000000000000000000000000000000001e300",
      "2.4703282292062327e-324", "2.4703282292062328e-324", "0e0", ".e1", "e1",
      "-", "+", "1.5e+", "1.5e-", "1,5", "0b1",
      // Plain decimals around the limits of the parser's Clinger path
      // (at most 15 digits; longer ones and exponents go to fast_float).
      "-0", "-0.0", "-0.", "007.50", "999999999999999", "9999999999999999",
      "99999999999999.9", "999999999999999.9", "0.00000000000001",
      "0.000000000000001", "0.0000000000000001", "123456789.012345",
      "-12345678.9012345", "0.1", "0.3", "2.675", "1.0000000000000002", "4.35",
      "5.02683", "-0.757015", "12345678901234567890123", "1.5e3"};
  // Decimals as data exports write them ("%.6g", "%.*f"), of every length.
  uint64_t y = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 20000; ++i) {
    y ^= y << 13;
    y ^= y >> 7;
    y ^= y << 17;
    const double v = (static_cast<double>(y >> 11) / 9007199254740992.0 - 0.5) *
                     std::pow(10.0, static_cast<int>(y % 13) - 4);
    tokens.push_back(i % 2 == 0 ? absl::StrFormat("%.*g", 1 + i % 16, v)
                                : absl::StrFormat("%.*f", i % 17, v));
  }
  uint64_t x = 88172645463325252ull;  // xorshift: varied bit patterns
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double v;
    std::memcpy(&v, &x, sizeof(v));
    if (!std::isfinite(v)) continue;
    if (i % 3 == 0) {
      tokens.push_back(absl::StrFormat("%.17g", v));
    } else {
      tokens.push_back(absl::StrFormat("%.*g", 1 + i % 17, v));
    }
  }
  ImportOptions o = Csv("n", 1);
  o.label_kind = LabelKind::kReal;
  for (const std::string& t : tokens) {
    double want = 0;
    const bool ok = absl::SimpleAtod(t, &want) && std::isfinite(want);
    absl::StatusOr<ParsedRows> got =
        ParseDatasetFile(o, absl::StrCat(t, ",1\n"));
    ASSERT_EQ(got.ok(), ok) << t << ": " << got.status();
    if (!ok) continue;
    ASSERT_EQ(got->values.size(), 1u);
    EXPECT_EQ(std::memcmp(&got->values[0], &want, sizeof(want)), 0) << t;
  }
}

// CSV rows take a one-pass path when every field is a number with at most
// blanks around it; anything else is parsed again by the general path. Both
// must give the same rows, and the same errors.
TEST(DatasetParserTest, CsvFastPathAgreesWithTheGeneralPath) {
  ImportOptions comma = Csv("n", 3);
  comma.label_kind = LabelKind::kReal;
  comma.csv_label_column = 1;
  ImportOptions blanks = comma;
  blanks.csv_delimiter = CsvDelimiter::kWhitespace;  // the general path only
  const std::vector<std::string> rows = {
      "1,2,3,4", " 1 ,\t2, 3 ,4 ", "-0.5,7,1e3,+2", "1.,.5,-.5,0",
      "5.02683,-1,0.000001,123456789012345678"};
  for (const std::string& row : rows) {
    absl::StatusOr<ParsedRows> fast = ParseDatasetFile(comma, row + "\n");
    std::string spaced = absl::StrReplaceAll(row, {{",", " "}});
    absl::StatusOr<ParsedRows> general = ParseDatasetFile(blanks, spaced);
    ASSERT_OK(fast.status()) << row;
    ASSERT_OK(general.status()) << row;
    EXPECT_EQ(fast->labels, general->labels) << row;
    EXPECT_EQ(fast->values, general->values) << row;
  }
  // Errors: the general path's, whatever the fast path saw first.
  EXPECT_THAT(ParseDatasetFile(comma, "1,2,3,4\n1,2,3\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 2: expected 4 columns")));
  // On the first line, the declared dimension disagrees with the file's.
  EXPECT_THAT(ParseDatasetFile(comma, "1,2,3\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the file has 3 columns (dimension 2 + 1 "
                                 "label) but the declared dimension is 3")));
  EXPECT_THAT(ParseDatasetFile(comma, "1,nan,3,4\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("label is NaN or Inf")));
  EXPECT_THAT(ParseDatasetFile(comma, "1,2,3x,4\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("column 3 is not a number")));
  ImportOptions bounded = comma;
  bounded.bounds.lower = {0, 0, 0};
  bounded.bounds.upper = {1, 1, 1};
  EXPECT_THAT(ParseDatasetFile(bounded, "0.5,2,0.5,7\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("feature 3 is outside")));
  ImportOptions binary = Csv("b", 1);
  EXPECT_THAT(ParseDatasetFile(binary, "0.5,1\n0.5,0\n0.5,-1\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 3: binary labels mix 0 and -1")));
  EXPECT_THAT(ParseDatasetFile(binary, "0.5,2\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("binary label must be")));
}

// ------------------------------------------------------------ staged import

class StagedImportTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    db_.reset();
    Database::Options options;
    options.block_rows = 2;  // several blocks even for tiny files
    ASSERT_OK_AND_ASSIGN(db_, Database::Open(path(), options));
  }
  std::string path() { return dir_.File("d.db"); }

  int64_t Query(const std::string& sql) {
    auto n = DatabaseTestPeer::QueryInt(*db_, sql);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.value_or(-1);
  }
  int64_t Count(absl::string_view table) {
    return Query(absl::StrCat("SELECT count(*) FROM ", table));
  }
  std::string FileBytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Whether the database files hold the 8 bytes of `v` anywhere.
  bool FilesContain(double v) {
    std::string bytes(sizeof(v), '\0');
    std::memcpy(bytes.data(), &v, sizeof(v));
    const std::string files = FileBytes(path()) + FileBytes(path() + "-wal");
    return files.find(bytes) != std::string::npos;
  }

  TempDir dir_;
  std::unique_ptr<Database> db_;
};

constexpr char kFile[] =
    "1 1:0.5 3:-2\n-1 2:1e-3\n1 1:1 2:2 3:3\n-1\n1 3:0.75\n";

// A CSV import whose dimension the file gives: while it is staged, the
// dataset is not found (its placeholder metadata reads back consistently,
// declared bounds and all); the commit stores the inferred dimension.
TEST_F(StagedImportTest, InferredCsvDimensionIsStoredAtCommit) {
  ImportOptions o = Csv("c", 0);
  o.bounds.lower = {-10, -10, -10};
  o.bounds.upper = {10, 10, 10};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(o));
  ASSERT_OK(import->Write("1,2,3,1\n4,5,"));
  EXPECT_THAT(db_->datasets().Get("c"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(import->Write("6,-1\n"));
  ASSERT_OK_AND_ASSIGN(DatasetRecord r, import->Commit());
  EXPECT_EQ(r.dimension, 3);
  EXPECT_EQ(r.rows, 2);
  ASSERT_OK_AND_ASSIGN(Dataset loaded, db_->datasets().Load("c"));
  EXPECT_EQ(loaded.dimension(), 3);
  EXPECT_EQ(loaded.dense()(1, 2), 6);
}

TEST_F(StagedImportTest, RowsAreInvisibleUntilCommitAndTheNameIsReserved) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Libsvm("s", 3)));
  ASSERT_OK(import->Write(kFile));
  ASSERT_OK(import->Sync());
  EXPECT_EQ(import->rows_stored(), 4);  // two full blocks; one row pending
  EXPECT_EQ(Count("dataset_blocks"), 2);
  EXPECT_THAT(db_->datasets().Get("s"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(auto listed, db_->datasets().List());
  EXPECT_TRUE(listed.empty());
  EXPECT_FALSE(db_->datasets().Load("s").ok());
  EXPECT_THAT(
      db_->datasets().BeginImport(Libsvm("s", 3)).status(),
      StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("being imported")));
  EXPECT_THAT(db_->datasets().Import(Libsvm("s", 3), kFile).status(),
              StatusIs(absl::StatusCode::kAlreadyExists));

  ASSERT_OK_AND_ASSIGN(DatasetRecord r, import->Commit());
  EXPECT_EQ(r.rows, 5);
  EXPECT_EQ(r.nonzeros, 7);
  EXPECT_EQ(r.deleted_at_micros, 0);
  EXPECT_EQ(Count("dataset_blocks"), 3);
  ASSERT_OK_AND_ASSIGN(Dataset loaded, db_->datasets().Load("s"));
  ASSERT_OK_AND_ASSIGN(ParsedRows expected,
                       ParseDatasetFile(Libsvm("s", 3), kFile));
  ASSERT_EQ(loaded.rows(), 5);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(loaded.labels()[i], expected.labels[i]);
  }
  EXPECT_EQ(loaded.sparse().nonZeros(), 7);
  EXPECT_THAT(import->Commit().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(StagedImportTest, CsvHeaderNamesArriveWithTheCommit) {
  ImportOptions o = Csv("c", 2);
  o.csv_has_header = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(o));
  for (const char* chunk : {"age,inc", "ome,y\n1,2,", "1\n3,4,-1\n5,6,1\n"}) {
    ASSERT_OK(import->Write(chunk));
  }
  EXPECT_EQ(Count("dataset_features"), 0);
  ASSERT_OK_AND_ASSIGN(DatasetRecord r, import->Commit());
  EXPECT_THAT(r.feature_names, ElementsAre("age", "income"));
  EXPECT_EQ(r.rows, 3);
}

TEST_F(StagedImportTest, DiscardAndDestructionLeaveNothingAndFreeTheName) {
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                         db_->datasets().BeginImport(Libsvm("s", 3)));
    ASSERT_OK(import->Write(kFile));
    ASSERT_OK(import->Discard());
    EXPECT_EQ(Count("datasets"), 0);
    EXPECT_EQ(Count("dataset_blocks"), 0);
    EXPECT_OK(import->Discard());  // idempotent
    EXPECT_THAT(import->Commit().status(),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                         db_->datasets().BeginImport(Libsvm("s", 3)));
    ASSERT_OK(import->Write(kFile));
    ASSERT_OK(import->Sync());
    EXPECT_EQ(Count("dataset_blocks"), 2);
  }  // destroyed without Commit
  EXPECT_EQ(Count("datasets"), 0);
  EXPECT_EQ(Count("dataset_blocks"), 0);
  ASSERT_OK(db_->datasets().Import(Libsvm("s", 3), kFile).status());
}

TEST_F(StagedImportTest, BadLineAfterStoredBlocksRemovesEveryRowAndCopy) {
  // A distinctive value, so the test can look for it in the files.
  const double mark = 31415.926535897931;
  std::string rows;
  for (int i = 0; i < 6; ++i) {
    absl::StrAppendFormat(&rows, "%d 1:%.17g 2:%d\n", i % 2 ? 1 : -1, mark, i);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Libsvm("s", 3)));
  ASSERT_OK(import->Write(rows));
  ASSERT_OK(import->Sync());
  EXPECT_EQ(Count("dataset_blocks"), 3);
  ASSERT_TRUE(FilesContain(mark)) << "the test cannot see staged rows";
  EXPECT_THAT(import->Write("1 1:1\n1 4:1\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 8: feature index 4 exceeds")));
  EXPECT_EQ(Count("datasets"), 0);
  EXPECT_EQ(Count("dataset_blocks"), 0);
  EXPECT_FALSE(FilesContain(mark));
  // Every later call reports the same error; nothing is written.
  EXPECT_THAT(
      import->Write("1 1:1\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 8")));
  EXPECT_THAT(
      import->Commit().status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 8")));
  EXPECT_EQ(Count("datasets"), 0);
}

TEST_F(StagedImportTest, OtherWritersProceedBetweenBlocks) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Libsvm("s", 3)));
  ASSERT_OK(import->Write("1 1:1\n-1 2:1\n1 3:1\n"));
  ASSERT_OK(import->Sync());
  ASSERT_EQ(Count("dataset_blocks"), 1);
  // The import holds no transaction between writes: other imports and
  // deletions commit meanwhile (a single long transaction would block them).
  ASSERT_OK(db_->datasets().Import(Libsvm("other", 3), kFile).status());
  ASSERT_OK(db_->datasets().Delete("other").status());
  ASSERT_OK(import->Write("-1 1:1\n"));
  ASSERT_OK_AND_ASSIGN(DatasetRecord r, import->Commit());
  EXPECT_EQ(r.rows, 4);
  ASSERT_OK_AND_ASSIGN(auto listed, db_->datasets().List());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "s");
}

TEST_F(StagedImportTest, StorageErrorOfABlockSurfacesAndLeavesNothing) {
  // The writer thread's second block fails to store.
  ASSERT_OK(DatabaseTestPeer::Execute(
      *db_,
      "CREATE TRIGGER fail_block BEFORE INSERT ON dataset_blocks WHEN "
      "NEW.block = 1 BEGIN SELECT RAISE(ABORT, 'injected failure'); END"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Libsvm("s", 3)));
  absl::Status s = import->Write(kFile);  // 2 full blocks queued
  if (s.ok()) s = import->Sync();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition,
                          HasSubstr("injected failure")));
  EXPECT_FALSE(import->Commit().ok());
  EXPECT_EQ(Count("datasets"), 0);
  EXPECT_EQ(Count("dataset_blocks"), 0);
}

TEST_F(StagedImportTest, CommitHookRunsOnlyInTheFinalTransaction) {
  int hook_runs = 0;
  ScopedCommitHook hook([&](Connection&) {
    ++hook_runs;
    return absl::OkStatus();
  });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Libsvm("s", 3)));
  ASSERT_OK(import->Write(kFile));
  ASSERT_OK(import->Sync());
  ASSERT_GT(Count("dataset_blocks"), 0);
  EXPECT_EQ(hook_runs, 0);
  ASSERT_OK(import->Commit().status());
  EXPECT_EQ(hook_runs, 1);
  EXPECT_EQ(hook.commits(), 1);
}

TEST_F(StagedImportTest, FailingCommitHookLeavesNothing) {
  ScopedCommitHook hook(
      [](Connection&) { return absl::InternalError("audit failed"); });
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Libsvm("s", 3)));
  ASSERT_OK(import->Write(kFile));
  EXPECT_THAT(import->Commit().status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("audit")));
  EXPECT_EQ(Count("datasets"), 0);
  EXPECT_EQ(Count("dataset_blocks"), 0);
}

TEST_F(StagedImportTest, ImportsInterruptedByACrashAreDiscardedAtNextOpen) {
  db_.reset();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "server": stages rows, then dies without any cleanup.
    Database::Options options;
    options.block_rows = 2;
    auto db = Database::Open(path(), options);
    if (!db.ok()) _exit(2);
    auto import = (*db)->datasets().BeginImport(Libsvm("s", 3));
    if (!import.ok() || !(*import)->Write(kFile).ok() ||
        !(*import)->Sync().ok()) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  Open();
  EXPECT_EQ(Count("dataset_blocks"), 2);
  EXPECT_EQ(Query("SELECT deleted_at FROM datasets WHERE name = 's'"),
            kImportInProgress);
  EXPECT_THAT(db_->datasets().Get("s"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(db_->datasets().DiscardStagedImports().value_or(-1), 1);
  EXPECT_EQ(Count("datasets"), 0);
  EXPECT_EQ(Count("dataset_blocks"), 0);
  EXPECT_EQ(db_->datasets().DiscardStagedImports().value_or(-1), 0);
  ASSERT_OK(db_->datasets().Import(Libsvm("s", 3), kFile).status());
  EXPECT_EQ(db_->datasets().DiscardStagedImports().value_or(-1), 0);
  EXPECT_EQ(Count("datasets"), 1);
}

}  // namespace
}  // namespace dpopt::storage
