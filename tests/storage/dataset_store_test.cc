#include "storage/dataset_store.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/dataset_import.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::ReadFileOrDie;
using ::dpopt::storage::testing::SourceDir;
using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using ::dpopt::storage::testing::Csv;
using ::dpopt::storage::testing::Libsvm;

class DatasetStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Database::Options options;
    options.block_rows = 2;  // several blocks even for tiny files
    ASSERT_OK_AND_ASSIGN(db_, Database::Open(dir_.File("d.db"), options));
  }

  int64_t Count(absl::string_view table) {
    auto n = DatabaseTestPeer::QueryInt(
        *db_, absl::StrCat("SELECT count(*) FROM ", table));
    EXPECT_TRUE(n.ok()) << n.status();
    return n.value_or(-1);
  }

  TempDir dir_;
  std::unique_ptr<Database> db_;
};

// ---------------------------------------------------------------- parsing

TEST(ImportOptionsTest, Validate) {
  EXPECT_OK(Libsvm("adult", 123).Validate());
  for (const char* bad : {"", "a b", "x/y", "é", "semi;colon"}) {
    EXPECT_THAT(Libsvm(bad, 3).Validate(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("name")))
        << bad;
  }
  EXPECT_OK(Libsvm(std::string(64, 'a'), 3).Validate());
  EXPECT_THAT(Libsvm(std::string(65, 'a'), 3).Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      Libsvm("a", 0).Validate(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dimension")));
  // A CSV file's dimension may be left to the file (0); never negative.
  EXPECT_OK(Csv("a", 0).Validate());
  EXPECT_THAT(
      Csv("a", -1).Validate(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dimension")));

  ImportOptions o = Libsvm("a", 3);
  o.epsilon_budget = 0;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("epsilon_budget")));
  o.epsilon_budget = std::numeric_limits<double>::infinity();
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o.epsilon_budget = 1;
  o.delta_budget = 1;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("delta_budget")));
  o.delta_budget = -1e-9;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o.delta_budget = 0;
  EXPECT_OK(o.Validate());

  ImportOptions pub = Libsvm("p", 3);
  pub.is_public = true;
  EXPECT_THAT(pub.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("public")));
  pub.epsilon_budget = 0;
  pub.delta_budget = 0;
  EXPECT_OK(pub.Validate());

  o = Libsvm("a", 3);
  o.budget_filter = "pld";
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Libsvm("a", 3);
  o.relation = "swap";
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Libsvm("a", 3);
  o.label_kind = LabelKind::kMulticlass;
  o.num_classes = 1;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Libsvm("a", 3);
  o.bounds.lower = {0, 0};
  o.bounds.upper = {1, 1};
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("bounds")));
  o.bounds.lower = {0, 2, 0};
  o.bounds.upper = {1, 1, 1};
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("feature 2")));
  o = Libsvm("a", 3);
  o.bounds.row_norm_bound = 0;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Libsvm("a", 3);
  o.feature_names = {"x", "y"};
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Csv("a", 3);
  o.csv_label_column = 4;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParseTest, LibsvmParsesSparseRowsExactly) {
  ImportOptions o = Libsvm("a", 5);
  ASSERT_OK_AND_ASSIGN(ParsedRows p, ParseDatasetFile(o,
                                                      "+1 1:0.5 3:-2\r\n"
                                                      "\n"
                                                      "-1\n"
                                                      "1 2:7\t5:1e-3\n"
                                                      "-1 2:4 5:0"));
  EXPECT_TRUE(p.sparse);
  EXPECT_EQ(p.rows, 4);
  EXPECT_EQ(p.dimension, 5);
  EXPECT_THAT(p.labels, ElementsAre(1, -1, 1, -1));
  EXPECT_THAT(p.row_offsets, ElementsAre(0, 2, 2, 4, 6));
  EXPECT_THAT(p.indices, ElementsAre(0, 2, 1, 4, 1, 4));
  EXPECT_THAT(p.values, ElementsAre(0.5, -2, 7, 1e-3, 4, 0));
  EXPECT_EQ(p.nonzeros(), 6);
}

TEST(ParseTest, BinaryZeroOneLabelsMapToMinusOnePlusOne) {
  ASSERT_OK_AND_ASSIGN(ParsedRows p,
                       ParseDatasetFile(Libsvm("a", 2), "0 1:1\n1 2:1\n0\n"));
  EXPECT_THAT(p.labels, ElementsAre(-1, 1, -1));
}

TEST(ParseTest, CsvParsesDenseRowsWithLabelColumn) {
  ImportOptions o = Csv("a", 3);
  o.csv_has_header = true;
  o.csv_label_column = 0;
  ASSERT_OK_AND_ASSIGN(ParsedRows p, ParseDatasetFile(o,
                                                      "y, age ,b,c\n"
                                                      "1, 0.25, 2, -3\n"
                                                      "0,1,2,3\n"));
  EXPECT_FALSE(p.sparse);
  EXPECT_EQ(p.rows, 2);
  EXPECT_THAT(p.labels, ElementsAre(1, -1));
  EXPECT_THAT(p.values, ElementsAre(0.25, 2, -3, 1, 2, 3));
  EXPECT_THAT(p.header_names, ElementsAre("age", "b", "c"));
}

TEST(ParseTest, WhitespaceCsvWithLastLabelColumn) {
  ImportOptions o = Csv("a", 2);
  o.csv_delimiter = CsvDelimiter::kWhitespace;
  o.label_kind = LabelKind::kMulticlass;
  o.num_classes = 3;
  ASSERT_OK_AND_ASSIGN(ParsedRows p, ParseDatasetFile(o, "1 2 0 \n3\t4   2\n"));
  EXPECT_THAT(p.labels, ElementsAre(0, 2));
  EXPECT_THAT(p.values, ElementsAre(1, 2, 3, 4));
}

struct BadInput {
  std::string test_name;
  ImportOptions options;
  std::string file;
  std::string message;  // expected substring
};

ImportOptions WithBounds(ImportOptions o, std::vector<double> lo,
                         std::vector<double> hi) {
  o.bounds.lower = std::move(lo);
  o.bounds.upper = std::move(hi);
  return o;
}

ImportOptions WithNorm(ImportOptions o, double norm) {
  o.bounds.row_norm_bound = norm;
  return o;
}

ImportOptions WithKind(ImportOptions o, LabelKind kind, int classes) {
  o.label_kind = kind;
  o.num_classes = classes;
  return o;
}

std::vector<BadInput> BadInputs() {
  const ImportOptions s = Libsvm("bad", 3);
  const ImportOptions c = Csv("bad", 2);
  return {
      {"EmptyFile", s, "", "no data rows"},
      {"BlankFile", s, "\n  \n\t\n", "no data rows"},
      {"HeaderOnlyCsv",
       [&] {
         ImportOptions o = c;
         o.csv_has_header = true;
         return o;
       }(),
       "a,b,y\n", "no data rows"},
      {"LibsvmNanValue", s, "1 1:1\n-1 2:nan\n",
       "line 2: value of feature 2 is NaN"},
      {"LibsvmInfValue", s, "1 1:inf\n",
       "line 1: value of feature 1 is NaN or Inf"},
      {"LibsvmNanLabel", s, "nan 1:1\n", "line 1: label is NaN"},
      {"LibsvmIndexOutOfRange", s, "1 1:1\n1 2:1 4:1\n",
       "line 2: feature index 4 exceeds dimension 3"},
      {"LibsvmIndexZero", s, "1 0:1\n", "line 1: feature index 0 is below 1"},
      {"LibsvmNonIncreasing", s, "1 2:1 2:3\n",
       "line 1: feature index 2 is not greater"},
      {"LibsvmDecreasing", s, "1 3:1 1:1\n",
       "line 1: feature index 1 is not greater"},
      {"LibsvmMissingColon", s, "1 1:1 2\n",
       "line 1: token 3 is not of the form"},
      {"LibsvmMalformedValue", s, "1 1:abc\n",
       "line 1: value of feature 1 is not a number"},
      {"LibsvmEmptyValue", s, "1 1:\n",
       "line 1: value of feature 1 is not a number"},
      {"LibsvmMalformedIndex", s, "1 x:1\n",
       "line 1: token 2: feature index is not an integer"},
      {"LibsvmMalformedLabel", s, "\n\nyes 1:1\n",
       "line 3: label is not a number"},
      {"BinaryLabelTwo", s, "2 1:1\n", "line 1: binary label must be"},
      {"BinaryLabelsMixZeroAndMinusOne", s, "0 1:1\n1 1:1\n-1 1:1\n",
       "line 3: binary labels mix 0 and -1"},
      {"MulticlassOutOfRange", WithKind(s, LabelKind::kMulticlass, 3),
       "0 1:1\n3 1:1\n", "line 2: class label must be an integer in [0, 3)"},
      {"MulticlassFraction", WithKind(s, LabelKind::kMulticlass, 3),
       "1.5 1:1\n", "line 1: class label"},
      {"RealLabelInf", WithKind(s, LabelKind::kReal, 0), "inf 1:1\n",
       "line 1: label is NaN or Inf"},
      {"OutOfBoundValue", WithBounds(s, {0, 0, 0}, {1, 1, 1}),
       "1 1:1\n1 3:1.5\n", "line 2: feature 3 is outside its declared bounds"},
      {"AbsentFeatureOutOfBounds", WithBounds(s, {0, 1, 0}, {1, 2, 1}),
       "1 1:1 2:1\n1 1:1\n", "line 2: feature 2 is absent"},
      {"RowNormExceeded", WithNorm(s, 1.0), "1 1:0.6 2:0.8\n1 1:0.8 2:0.8\n",
       "line 2: row L2 norm exceeds"},
      {"NulByte", s, std::string("1 1:1\n\0", 7), "NUL"},
      {"CsvTooFewColumns", c, "1,2,1\n1,1\n", "line 2: expected 3 columns"},
      {"CsvTooManyColumns", c, "1,2,1\n1,2,1,4\n",
       "line 2: expected 3 columns (dimension 2 + 1 label), found 4"},
      // A declared dimension that disagrees with the file names both.
      {"CsvDeclaredDimensionDisagrees", c, "1,2,3,1\n",
       "line 1: the file has 4 columns (dimension 3 + 1 label) but the "
       "declared dimension is 2"},
      {"CsvDeclaredDimensionDisagreesAfterBlankLines", c, "\n \n1,1\n",
       "line 3: the file has 2 columns (dimension 1 + 1 label) but the "
       "declared dimension is 2"},
      // An inferred dimension: every row is checked against the first line.
      {"CsvInferredRowTooShort", Csv("bad", 0), "1,2,3,1\n4,5,6,1\n1,2,1\n",
       "line 3: expected 4 columns (dimension 3 + 1 label, as on line 1), "
       "found 3"},
      {"CsvInferredRowTooLong", Csv("bad", 0), "\n1,2,1\n1,2,3,1\n",
       "line 3: expected 3 columns (dimension 2 + 1 label, as on line 2), "
       "found 4"},
      {"CsvInferredWhitespaceRow",
       [] {
         ImportOptions o = Csv("bad", 0);
         o.csv_delimiter = CsvDelimiter::kWhitespace;
         return o;
       }(),
       "1 2 1\n1 2 3 1\n", "line 2: expected 3 columns"},
      {"CsvInferredFromHeader",
       [] {
         ImportOptions o = Csv("bad", 0);
         o.csv_has_header = true;
         return o;
       }(),
       "a,b,y\n1,2,3,1\n",
       "line 2: expected 3 columns (dimension 2 + 1 label, as on line 1), "
       "found 4"},
      {"CsvInferredSingleColumn", Csv("bad", 0), "1\n",
       "line 1: found 1 column"},
      {"CsvInferredBoundsOfAnotherLength",
       WithBounds(Csv("bad", 0), {-1, -1}, {1, 1}), "1,2,3,1\n",
       "line 1: 4 columns make the dimension 3, but declared feature bounds "
       "must have one entry per feature (3), got 2"},
      {"CsvInferredLabelColumnBeyondTheRow",
       [] {
         ImportOptions o = Csv("bad", 0);
         o.csv_label_column = 3;
         return o;
       }(),
       "1,2,1\n",
       "line 1: 3 columns make the dimension 2, but "
       "csv_label_column must be -1 (last) or in [0, 2]"},
      {"CsvEmptyField", c, "1,,1\n", "line 1: column 2 is not a number"},
      {"CsvNan", c, "1,NaN,1\n", "line 1: column 2 is NaN or Inf"},
      {"CsvInf", c, "-inf,0,1\n", "line 1: column 1 is NaN or Inf"},
      {"CsvBadLabel", c, "1,0,yes\n", "line 1: label is not a number"},
      {"CsvOutOfBounds", WithBounds(c, {-1, -1}, {1, 1}), "1,-2,1\n",
       "line 1: feature 2 is outside its declared bounds"},
      {"CsvHeaderWrongWidth",
       [&] {
         ImportOptions o = c;
         o.csv_has_header = true;
         return o;
       }(),
       "a,y\n1,2,1\n",
       "line 1: the file has 2 columns (dimension 1 + 1 label) but the "
       "declared dimension is 2"},
  };
}

void PrintTo(const BadInput& c, std::ostream* os) { *os << c.test_name; }

class BadInputTest : public DatasetStoreTest,
                     public ::testing::WithParamInterface<BadInput> {};

TEST_P(BadInputTest, IsInvalidArgumentAndLeavesDatabaseUnchanged) {
  const BadInput& c = GetParam();
  EXPECT_THAT(
      ParseDatasetFile(c.options, c.file),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  EXPECT_THAT(
      db_->datasets().Import(c.options, c.file),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  // The streaming parser, fed one byte at a time, finds the same error.
  absl::Status streamed = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<DatasetParser> parser,
                     DatasetParser::Create(c.options, {}, [](ParsedRows&) {
                       return absl::OkStatus();
                     }));
    for (char ch : c.file) {
      RETURN_IF_ERROR(parser->Feed(absl::string_view(&ch, 1)));
    }
    return parser->Finish();
  }();
  EXPECT_THAT(streamed, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr(c.message)));
  EXPECT_EQ(Count("datasets"), 0);
  EXPECT_EQ(Count("dataset_blocks"), 0);
  EXPECT_EQ(Count("dataset_features"), 0);
  EXPECT_THAT(db_->datasets().Get("bad"),
              StatusIs(absl::StatusCode::kNotFound));
}

INSTANTIATE_TEST_SUITE_P(All, BadInputTest, ::testing::ValuesIn(BadInputs()),
                         [](const ::testing::TestParamInfo<BadInput>& info) {
                           return info.param.test_name;
                         });

TEST(ParseTest, ErrorMessagesNeverEchoRowValues) {
  // Distinctive values that must not appear in any message.
  ImportOptions bounded = Libsvm("e", 3);
  bounded.bounds.lower = {0, 0, 0};
  bounded.bounds.upper = {1, 1, 1};
  ImportOptions normed = Libsvm("e", 3);
  normed.bounds.row_norm_bound = 1;
  ImportOptions csv = Csv("e", 2);
  const std::vector<std::pair<ImportOptions, std::string>> cases = {
      {bounded, "1 2:0.987654321e3\n"},
      {normed, "1 1:0.987654321e3\n"},
      {Libsvm("e", 3), "0.987654321 1:1\n"},
      {Libsvm("e", 3), "1 1:0.987654321xyz\n"},
      {Libsvm("e", 3), "1 1:1 0.987654321\n"},
      {csv, "0.987654321,0.987654321\n"},
      {csv, "0.987654321,secretxyz,1\n"},
  };
  for (const auto& [options, file] : cases) {
    absl::Status s = ParseDatasetFile(options, file).status();
    EXPECT_THAT(
        s, StatusIs(absl::StatusCode::kInvalidArgument,
                    AllOf(Not(HasSubstr("987654321")),
                          Not(HasSubstr("secretxyz")), Not(HasSubstr("xyz")))))
        << file;
  }
}

// ---------------------------------------------------------------- store

TEST_F(DatasetStoreTest, ImportGetListAndMetadata) {
  ImportOptions o = Libsvm("small", 4);
  o.description = "tiny test set";
  o.feature_names = {"a", "b", "c", "d"};
  o.bounds.lower = {0, 0, -1, 0};
  o.bounds.upper = {1, 1, 1, 1};
  o.bounds.row_norm_bound = 2.0;
  o.relation = std::string(kRelationReplaceOne);
  o.budget_filter = std::string(kFilterBasic);
  ASSERT_OK_AND_ASSIGN(DatasetRecord r,
                       db_->datasets().Import(o, "1 1:1 3:-1\n-1 2:1\n1\n"));
  EXPECT_GT(r.id, 0);
  EXPECT_EQ(r.name, "small");
  EXPECT_EQ(r.rows, 3);
  EXPECT_EQ(r.dimension, 4);
  EXPECT_EQ(r.nonzeros, 3);
  EXPECT_FALSE(r.is_public);
  EXPECT_TRUE(r.sparse);
  EXPECT_EQ(r.format, DatasetFormat::kLibsvm);
  EXPECT_EQ(r.label_kind, LabelKind::kBinary);
  EXPECT_EQ(r.num_classes, 2);
  EXPECT_EQ(r.relation, "replace_one");
  EXPECT_EQ(r.budget_filter, "basic");
  EXPECT_EQ(r.epsilon_budget, 3);
  EXPECT_EQ(r.delta_budget, 1e-6);
  EXPECT_THAT(r.bounds.lower, ElementsAre(0, 0, -1, 0));
  EXPECT_THAT(r.bounds.upper, ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(r.bounds.row_norm_bound, 2.0);
  EXPECT_THAT(r.feature_names, ElementsAre("a", "b", "c", "d"));
  EXPECT_EQ(r.description, "tiny test set");
  EXPECT_GT(r.created_at_micros, 0);
  EXPECT_EQ(Count("dataset_blocks"), 2);  // block_rows = 2

  ASSERT_OK_AND_ASSIGN(DatasetRecord got, db_->datasets().Get("small"));
  EXPECT_EQ(got.id, r.id);
  EXPECT_THAT(got.feature_names, ElementsAre("a", "b", "c", "d"));

  ImportOptions pub = Csv("b-public", 1);
  pub.is_public = true;
  pub.epsilon_budget = 0;
  pub.delta_budget = 0;
  ASSERT_OK_AND_ASSIGN(DatasetRecord p, db_->datasets().Import(pub, "1,1\n"));
  EXPECT_TRUE(p.is_public);
  EXPECT_FALSE(p.sparse);
  EXPECT_FALSE(p.bounds.row_norm_bound.has_value());
  EXPECT_TRUE(p.bounds.lower.empty());

  ASSERT_OK_AND_ASSIGN(std::vector<DatasetRecord> all, db_->datasets().List());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "b-public");
  EXPECT_EQ(all[1].name, "small");

  EXPECT_THAT(db_->datasets().Get("nope"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  EXPECT_THAT(db_->datasets().Load("nope"),
              StatusIs(absl::StatusCode::kNotFound));
}

// Piecewise-affine: a max-affine problem's public description is stored and
// read back as is, with the linf_offsets relation; the relation and the
// description go together.
TEST_F(DatasetStoreTest, ProblemDescriptionRoundTrips) {
  ImportOptions o = Csv("pa", 2);
  o.label_kind = LabelKind::kReal;
  o.num_classes = 0;
  o.relation = std::string(kRelationLinfOffsets);
  EXPECT_THAT(db_->datasets().Import(o, "1,2,0.5\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o.problem_json = R"({"b_max": 1})";
  ASSERT_OK_AND_ASSIGN(DatasetRecord r,
                       db_->datasets().Import(o, "1,2,0.5\n3,4,-1\n"));
  EXPECT_EQ(r.relation, "linf_offsets");
  EXPECT_EQ(r.problem_json, R"({"b_max": 1})");
  ASSERT_OK_AND_ASSIGN(DatasetRecord got, db_->datasets().Get("pa"));
  EXPECT_EQ(got.problem_json, r.problem_json);
  ImportOptions plain = Csv("plain", 2);
  plain.problem_json = "{}";
  EXPECT_THAT(db_->datasets().Import(plain, "1,2,1\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(DatasetRecord ordinary,
                       db_->datasets().Import(Csv("ordinary", 2), "1,2,1\n"));
  EXPECT_EQ(ordinary.problem_json, "");
}

TEST_F(DatasetStoreTest, DuplicateNameIsAlreadyExistsAndChangesNothing) {
  ASSERT_OK(db_->datasets().Import(Libsvm("dup", 2), "1 1:1\n-1 2:1\n"));
  const int64_t blocks = Count("dataset_blocks");
  EXPECT_THAT(db_->datasets().Import(Libsvm("dup", 2), "1 1:1\n1 1:1\n1\n"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("dup")));
  EXPECT_EQ(Count("datasets"), 1);
  EXPECT_EQ(Count("dataset_blocks"), blocks);
  ASSERT_OK_AND_ASSIGN(DatasetRecord r, db_->datasets().Get("dup"));
  EXPECT_EQ(r.rows, 2);
}

// A worker-pool placement: recorded per rank, replaced by the next one,
// refused for a dataset that is gone, and removed with the dataset's rows.
TEST_F(DatasetStoreTest, PlacementIsRecordedReplacedAndRemovedWithTheRows) {
  ASSERT_OK_AND_ASSIGN(
      DatasetRecord r,
      db_->datasets().Import(Libsvm("placed", 2), "1 1:1\n-1 2:1\n1 1:2\n"));
  ASSERT_OK_AND_ASSIGN(auto none, db_->datasets().FindPlacement(r.id));
  EXPECT_FALSE(none.has_value());
  std::vector<PlacedShard> two = {{0, "host-a", 1}, {1, "host-b", 2}};
  ASSERT_OK(db_->datasets().RecordPlacement(r.id, r.created_at_micros, 2, two));
  ASSERT_OK_AND_ASSIGN(auto found, db_->datasets().FindPlacement(r.id));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ranks, 2);
  ASSERT_EQ(found->shards.size(), 2u);
  EXPECT_EQ(found->shards[1].host, "host-b");
  EXPECT_EQ(found->shards[1].rows, 2);
  EXPECT_GT(found->placed_at_micros, 0);
  // A new placement replaces the old one's rows.
  std::vector<PlacedShard> three = {
      {0, "host-a", 1}, {1, "host-b", 1}, {2, "host-c", 1}};
  ASSERT_OK(
      db_->datasets().RecordPlacement(r.id, r.created_at_micros, 3, three));
  ASSERT_OK_AND_ASSIGN(found, db_->datasets().FindPlacement(r.id));
  EXPECT_EQ(found->ranks, 3);
  EXPECT_EQ(Count("dataset_placements"), 3);
  // Shards out of rank order, or not one per rank, are refused.
  EXPECT_THAT(db_->datasets().RecordPlacement(r.id, r.created_at_micros, 2,
                                              {{1, "b", 1}, {0, "a", 1}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      db_->datasets().RecordPlacement(r.id, r.created_at_micros, 3, two),
      StatusIs(absl::StatusCode::kInvalidArgument));
  // Another dataset's creation time (a reused id) is not this dataset.
  EXPECT_THAT(
      db_->datasets().RecordPlacement(r.id, r.created_at_micros + 1, 2, two),
      StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(db_->datasets().Delete("placed"));
  EXPECT_EQ(Count("dataset_placements"), 0);
  EXPECT_THAT(
      db_->datasets().RecordPlacement(r.id, r.created_at_micros, 2, two),
      StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Count("dataset_placements"), 0);
}

TEST_F(DatasetStoreTest, RemovePlacementForgetsIt) {
  ASSERT_OK_AND_ASSIGN(DatasetRecord r,
                       db_->datasets().Import(Libsvm("placed", 2), "1 1:1\n"));
  ASSERT_OK(db_->datasets().RecordPlacement(r.id, r.created_at_micros, 1,
                                            {{0, "host-a", 1}}));
  ASSERT_OK(db_->datasets().RemovePlacement(r.id));
  ASSERT_OK_AND_ASSIGN(auto found, db_->datasets().FindPlacement(r.id));
  EXPECT_FALSE(found.has_value());
  ASSERT_OK_AND_ASSIGN(DatasetRecord still, db_->datasets().Get("placed"));
  EXPECT_EQ(still.rows, 1);
}

TEST_F(DatasetStoreTest, SparseLoadRoundTripsExactly) {
  const std::string file =
      "+1 1:0.1 3:-2.5\n-1\n1 2:7 5:1e-300\n-1 5:3.141592653589793\n0.0 1:0\n";
  ImportOptions o = Libsvm("s", 5);
  o.label_kind = LabelKind::kReal;
  o.num_classes = 0;
  ASSERT_OK(db_->datasets().Import(o, file));
  ASSERT_OK_AND_ASSIGN(Dataset d, db_->datasets().Load("s"));
  ASSERT_TRUE(d.is_sparse());
  EXPECT_EQ(d.rows(), 5);
  EXPECT_EQ(d.dimension(), 5);
  EXPECT_EQ(d.label_kind(), LabelKind::kReal);
  EXPECT_THAT(std::vector<double>(d.labels().data(), d.labels().data() + 5),
              ElementsAre(1, -1, 1, -1, 0));
  Eigen::MatrixXd expected = Eigen::MatrixXd::Zero(5, 5);
  expected(0, 0) = 0.1;
  expected(0, 2) = -2.5;
  expected(2, 1) = 7;
  expected(2, 4) = 1e-300;
  expected(3, 4) = 3.141592653589793;
  EXPECT_EQ(Eigen::MatrixXd(d.sparse()), expected);  // bitwise-equal doubles
  EXPECT_EQ(d.sparse().nonZeros(), 6);               // explicit 0 kept
  EXPECT_OK(d.Validate());
}

TEST_F(DatasetStoreTest, DenseLoadRoundTripsExactly) {
  ImportOptions o = Csv("dense", 3);
  o.label_kind = LabelKind::kMulticlass;
  o.num_classes = 4;
  ASSERT_OK(db_->datasets().Import(
      o, "0.1,0.2,0.3,3\n-1e10,0,5e-324,0\n1,2,3,1\n7,8,9,2\n4,5,6,0\n"));
  ASSERT_OK_AND_ASSIGN(Dataset d, db_->datasets().Load("dense"));
  ASSERT_FALSE(d.is_sparse());
  Eigen::MatrixXd expected(5, 3);
  expected << 0.1, 0.2, 0.3, -1e10, 0, 5e-324, 1, 2, 3, 7, 8, 9, 4, 5, 6;
  EXPECT_EQ(d.dense(), expected);
  Eigen::VectorXd labels(5);
  labels << 3, 0, 1, 2, 0;
  EXPECT_EQ(d.labels(), labels);
  EXPECT_EQ(d.num_classes(), 4);
  EXPECT_EQ(Count("dataset_blocks"), 3);
}

// A CSV import without a declared dimension takes it from the first line,
// on the streaming path (Import) and the parsed one (ImportParsed).
TEST_F(DatasetStoreTest, CsvDimensionIsInferredFromTheFirstLine) {
  const std::string file = "\n0.5,1,2,1\n3,4,5,0\n";
  ASSERT_OK_AND_ASSIGN(DatasetRecord r,
                       db_->datasets().Import(Csv("inferred", 0), file));
  EXPECT_EQ(r.dimension, 3);
  EXPECT_EQ(r.rows, 2);
  ASSERT_OK_AND_ASSIGN(Dataset d, db_->datasets().Load("inferred"));
  Eigen::MatrixXd expected(2, 3);
  expected << 0.5, 1, 2, 3, 4, 5;
  EXPECT_EQ(d.dense(), expected);
  EXPECT_EQ(d.dimension(), 3);

  ASSERT_OK_AND_ASSIGN(ParsedRows rows,
                       ParseDatasetFile(Csv("parsed", 0), file));
  EXPECT_EQ(rows.dimension, 3);
  ASSERT_OK_AND_ASSIGN(DatasetRecord p,
                       db_->datasets().ImportParsed(Csv("parsed", 0), rows));
  EXPECT_EQ(p.dimension, 3);
  // Declared and matching: the same dataset.
  ASSERT_OK_AND_ASSIGN(DatasetRecord declared,
                       db_->datasets().Import(Csv("declared", 3), file));
  EXPECT_EQ(declared.dimension, 3);
  // Rows of another dimension than the options declare are refused.
  EXPECT_THAT(db_->datasets().ImportParsed(Csv("mismatch", 2), rows),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dimension 3, the options declare 2")));
}

TEST_F(DatasetStoreTest, InferredCsvDimensionWithHeaderBoundsAndSmallBlocks) {
  ImportOptions o = Csv("h", 0);
  o.csv_has_header = true;
  o.bounds.lower = {0, 0};
  o.bounds.upper = {10, 10};
  // Many blocks: the first is reserved before the dimension is known.
  std::string file = "x1,x2,label\n";
  for (int i = 0; i < 10000; ++i) file += absl::StrCat(i % 10, ",1,1\n");
  ASSERT_OK_AND_ASSIGN(DatasetRecord r, db_->datasets().Import(o, file));
  EXPECT_EQ(r.dimension, 2);
  EXPECT_EQ(r.rows, 10000);
  EXPECT_THAT(r.feature_names, ElementsAre("x1", "x2"));
  ASSERT_OK_AND_ASSIGN(Dataset d, db_->datasets().Load("h"));
  ASSERT_EQ(d.dense().rows(), 10000);
  EXPECT_EQ(d.dense()(9999, 0), 9);
  EXPECT_EQ(d.dense()(9999, 1), 1);
}

TEST_F(DatasetStoreTest, CsvHeaderBecomesFeatureNames) {
  ImportOptions o = Csv("h", 2);
  o.csv_has_header = true;
  ASSERT_OK_AND_ASSIGN(DatasetRecord r,
                       db_->datasets().Import(o, "x1,x2,label\n1,2,1\n"));
  EXPECT_THAT(r.feature_names, ElementsAre("x1", "x2"));
}

TEST_F(DatasetStoreTest, CorruptBlockIsDataLoss) {
  ASSERT_OK(db_->datasets().Import(Libsvm("c", 3), "1 1:1\n-1 2:1\n1 3:1\n"));
  ASSERT_OK(DatabaseTestPeer::Execute(
      *db_, "UPDATE dataset_blocks SET vals = x'00' WHERE block = 1"));
  EXPECT_THAT(db_->datasets().Load("c"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("corrupt")));
  ASSERT_OK(DatabaseTestPeer::Execute(
      *db_, "DELETE FROM dataset_blocks WHERE block = 1"));
  EXPECT_THAT(db_->datasets().Load("c"), StatusIs(absl::StatusCode::kDataLoss));
}

// ---------------------------------------------------------------- a9a

TEST(A9aTest, ImportsAndLoadsRealAdultData) {
  const std::string dir = SourceDir() + "/data/adult/";
  const std::string train = ReadFileOrDie(dir + "a9a");
  const std::string test = ReadFileOrDie(dir + "a9a.t");
  ASSERT_FALSE(train.empty());
  TempDir tmp;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db,
                       Database::Open(tmp.File("a9a.db")));
  ASSERT_OK_AND_ASSIGN(DatasetRecord r,
                       db->datasets().Import(Libsvm("adult", 123), train));
  EXPECT_EQ(r.rows, 32561);
  EXPECT_EQ(r.dimension, 123);
  EXPECT_TRUE(r.sparse);
  ImportOptions pub = Libsvm("adult-test", 123);
  pub.is_public = true;
  pub.epsilon_budget = 0;
  pub.delta_budget = 0;
  ASSERT_OK_AND_ASSIGN(DatasetRecord t, db->datasets().Import(pub, test));
  EXPECT_EQ(t.rows, 16281);
  EXPECT_EQ(t.dimension, 123);  // from the options; max index in a9a.t is 122

  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(Dataset d, db->datasets().Load("adult"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // Printed, not asserted (timing belongs in benchmarks).
  std::printf("load a9a: %.3f s\n", seconds);
  EXPECT_EQ(d.rows(), 32561);
  EXPECT_EQ(d.dimension(), 123);
  EXPECT_EQ(d.sparse().nonZeros(), r.nonzeros);
  EXPECT_OK(d.Validate());
  // Known answers from the file: first row "-1 3:1 11:1 14:1 ...", and the
  // label counts of a9a (7841 positives).
  EXPECT_EQ(d.label(0), -1);
  EXPECT_EQ(d.sparse().coeff(0, 2), 1.0);
  EXPECT_EQ(d.sparse().coeff(0, 10), 1.0);
  EXPECT_EQ(d.sparse().coeff(0, 0), 0.0);
  EXPECT_EQ((d.labels().array() > 0).count(), 7841);

  ASSERT_OK_AND_ASSIGN(Dataset dt, db->datasets().Load("adult-test"));
  EXPECT_EQ(dt.rows(), 16281);
  EXPECT_EQ(dt.dimension(), 123);
}

}  // namespace
}  // namespace dpopt::storage
