// Piecewise-affine through the real server: the max-affine dataset kind
// (import from CSV + polytope, public parts only in DatasetInfo, the
// l-infinity relation on the dataset and in the ledger), every job type
// estimated and run, exact charges, M_E refused before charging when
// infeasible, and max-affine datasets and pa_* jobs kept apart from the
// other relations and job types.
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

constexpr int kPieces = 20;
constexpr int kDim = 3;

// a_ij, b_i ~ N(0, 1), seed 1; CSV "a_1,...,a_d,b".
std::string ProblemCsv(uint64_t seed = 1) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n01(0, 1);
  std::string out;
  for (int i = 0; i < kPieces; ++i) {
    for (int j = 0; j < kDim; ++j)
      absl::StrAppendFormat(&out, "%.17g,", n01(gen));
    absl::StrAppendFormat(&out, "%.17g\n", n01(gen));
  }
  return out;
}

v1::ImportHeader MaxAffineHeader(const std::string& name, bool is_public,
                                 double c = 1.0) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_CSV);
  h.set_dimension(kDim);
  h.set_label_last(true);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(3);
    h.set_delta_budget(0);
    h.set_budget_filter(v1::BUDGET_FILTER_BASIC);
  }
  v1::MaxAffineProblem* m = h.mutable_max_affine();
  m->set_b_max(1.0);
  for (int j = 0; j < kDim; ++j) {
    m->mutable_polytope()->add_lower(-c);
    m->mutable_polytope()->add_upper(c);
  }
  return h;
}

v1::JobSpec Spec(const std::string& json) {
  v1::JobSpec spec;
  auto st = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << json;
  return spec;
}

std::string PaSpec(const std::string& dataset, const std::string& algorithm,
                   double eps = 0.5) {
  return absl::StrFormat(
      R"({"dataset": "%s", "privacy": {"epsilon": %g}, "algorithm": {%s}})",
      dataset, eps, algorithm);
}

class PiecewiseAffineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        server_.Import(MaxAffineHeader("pa", false), ProblemCsv()).ok());
    ASSERT_TRUE(
        server_.Import(MaxAffineHeader("pa-public", true), ProblemCsv()).ok());
  }

  grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    return server_.jobs().SubmitJob(&ctx, req, job);
  }

  v1::JobResult RunToResult(const v1::JobSpec& spec) {
    v1::Job job;
    const grpc::Status st = Submit(spec, &job);
    EXPECT_TRUE(st.ok()) << st.error_message();
    const v1::Job done = server_.WaitForJob(job.id());
    EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    grpc::ClientContext ctx;
    v1::GetJobResultRequest req;
    req.set_id(job.id());
    v1::JobResult result;
    EXPECT_TRUE(server_.jobs().GetJobResult(&ctx, req, &result).ok());
    return result;
  }

  v1::ListLedgerResponse Ledger(const std::string& name) {
    grpc::ClientContext ctx;
    v1::ListLedgerRequest req;
    req.set_dataset(name);
    v1::ListLedgerResponse out;
    EXPECT_TRUE(server_.budget().ListLedger(&ctx, req, &out).ok());
    return out;
  }

  TestServer server_;
};

TEST_F(PiecewiseAffineTest, DatasetShowsPublicPartsOnly) {
  grpc::ClientContext ctx;
  v1::GetDatasetRequest req;
  req.set_name("pa");
  v1::DatasetInfo d;
  ASSERT_TRUE(server_.datasets().GetDataset(&ctx, req, &d).ok());
  EXPECT_EQ(d.relation(), v1::LINF_OFFSETS);
  EXPECT_EQ(d.rows(), kPieces);
  EXPECT_EQ(d.dimension(), kDim);
  ASSERT_TRUE(d.has_max_affine());
  EXPECT_EQ(d.max_affine().b_max(), 1.0);
  EXPECT_EQ(d.max_affine().pieces(), kPieces);
  EXPECT_NEAR(d.max_affine().diameter(), 2 * std::sqrt(3.0), 1e-12);
  EXPECT_GT(d.max_affine().slope_norm_bound(), 0);
  EXPECT_EQ(d.nonzeros(), 0);  // a statistic of private rows: not shown
  // No offset appears anywhere in the reply.
  const std::string text = d.DebugString();
  std::mt19937_64 gen(1);
  std::normal_distribution<double> n01(0, 1);
  for (int i = 0; i < kPieces; ++i) {
    for (int j = 0; j < kDim; ++j) n01(gen);
    const double b = n01(gen);
    EXPECT_EQ(text.find(absl::StrFormat("%.6g", b).substr(0, 6)),
              std::string::npos)
        << "offset " << i;
  }
}

TEST_F(PiecewiseAffineTest, ImportRefusesInconsistentDeclarations) {
  v1::ImportHeader h = MaxAffineHeader("bad", false);
  h.set_relation(v1::ADD_REMOVE);
  EXPECT_EQ(server_.Import(h, ProblemCsv()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  h = MaxAffineHeader("bad", false);
  h.mutable_max_affine()->set_b_max(0);
  EXPECT_EQ(server_.Import(h, ProblemCsv()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  h = MaxAffineHeader("bad", false);
  h.mutable_max_affine()->mutable_polytope()->set_upper(0, -5);
  EXPECT_EQ(server_.Import(h, ProblemCsv()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  h = MaxAffineHeader("bad", false);
  h.set_label_type(v1::LABEL_TYPE_BINARY);
  EXPECT_EQ(server_.Import(h, ProblemCsv()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ImportHeader plain;
  plain.set_name("bad");
  plain.set_format(v1::DATASET_FORMAT_CSV);
  plain.set_dimension(kDim);
  plain.set_label_type(v1::LABEL_TYPE_REAL);
  plain.set_epsilon_budget(1);
  plain.set_relation(v1::LINF_OFFSETS);
  EXPECT_EQ(server_.Import(plain, ProblemCsv()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// Every job type: estimate prices it (nothing charged), submit runs it, the
// ledger records exactly its epsilon once with the event it was analysed as.
TEST_F(PiecewiseAffineTest, EveryJobTypeChargesExactlyItsEpsilon) {
  const std::vector<std::pair<std::string, std::string>> jobs = {
      {"pa_perturb_problem", R"("pa_perturb_problem": {})"},
      {"pa_perturb_solution",
       R"("pa_perturb_solution": {"noise": "PA_SOLUTION_NOISE_TIGHT"})"},
      {"pa_exponential", R"("pa_exponential": {})"},
      {"pa_subgradient",
       R"("pa_subgradient": {"iterations": 50, "readout": "PA_READOUT_AVERAGE"})"},
  };
  double charged = 0;
  for (const auto& [name, algo] : jobs) {
    const v1::JobSpec spec = Spec(PaSpec("pa", algo, 0.5));
    grpc::ClientContext ctx;
    v1::EstimateJobRequest ereq;
    *ereq.mutable_spec() = spec;
    v1::JobEstimate est;
    ASSERT_TRUE(server_.jobs().EstimateJob(&ctx, ereq, &est).ok()) << name;
    EXPECT_TRUE(est.admissible());
    EXPECT_EQ(est.cost().epsilon(), 0.5) << name;
    EXPECT_EQ(est.cost().delta(), 0) << name;
    EXPECT_EQ(est.budget_before().charges(),
              static_cast<int64_t>(charged / 0.5 + 0.5));
    const v1::JobResult r = RunToResult(spec);
    EXPECT_EQ(r.model().loss(), "max_affine_decision") << name;
    ASSERT_EQ(r.model().weights_size(), kDim) << name;
    for (double w : r.model().weights()) {
      EXPECT_TRUE(std::isfinite(w));
      EXPECT_LE(std::abs(w), 1.0);  // a point of P
    }
    charged += 0.5;
  }
  const v1::ListLedgerResponse ledger = Ledger("pa");
  ASSERT_EQ(ledger.entries_size(), 4);
  for (const auto& e : ledger.entries()) {
    EXPECT_EQ(e.epsilon(), 0.5);
    EXPECT_EQ(e.delta(), 0);
  }
  EXPECT_THAT(ledger.entries(0).event_json(),
              ::testing::HasSubstr("epsilon_delta"));
  EXPECT_THAT(ledger.entries(2).event_json(),
              ::testing::HasSubstr("exponential"));
  EXPECT_NEAR(ledger.budget().epsilon_spent(), 2.0, 1e-9);
}

// pa_subgradient's stated guarantee is pure epsilon-DP; its k selections are
// charged as exponential mechanisms. Under basic composition the charge is
// exactly the job's epsilon; under an RDP filter at delta 1e-6 it is the
// zCDP curve alpha eps^2 / (8 k) converted as the accountant does
// (eps = 1, k = 100: minimum at alpha = 63, 0.21876), and the estimate shows
// both numbers.
TEST_F(PiecewiseAffineTest, SubgradientIsChargedThroughZcdpUnderRdp) {
  v1::ImportHeader h = MaxAffineHeader("pa-rdp", false);
  h.set_epsilon_budget(1);
  h.set_delta_budget(1e-6);
  h.set_budget_filter(v1::BUDGET_FILTER_RDP);
  ASSERT_TRUE(server_.Import(h, ProblemCsv()).ok());
  const std::string algo = R"("pa_subgradient": {"iterations": 100})";
  auto estimate = [&](const std::string& dataset) {
    grpc::ClientContext ctx;
    v1::EstimateJobRequest req;
    *req.mutable_spec() = Spec(PaSpec(dataset, algo, 1.0));
    v1::JobEstimate est;
    EXPECT_TRUE(server_.jobs().EstimateJob(&ctx, req, &est).ok());
    return est;
  };
  const double a = 63;
  const double hand =
      a / 800 + std::log1p(-1 / a) - std::log(1e-6 * a) / (a - 1);
  const v1::JobEstimate rdp = estimate("pa-rdp");
  EXPECT_TRUE(rdp.admissible());
  EXPECT_EQ(rdp.cost().guarantee_epsilon(), 1.0);
  EXPECT_GE(rdp.cost().epsilon(), hand);
  EXPECT_NEAR(rdp.cost().epsilon(), hand, 2e-12);
  EXPECT_EQ(rdp.cost().delta(), 1e-6);
  EXPECT_EQ(rdp.cost().event_json(),
            R"({"exponential_mechanisms":{"epsilon":1.0,"count":100}})");
  // Basic composition (dataset "pa", budget 3): exactly the job's epsilon.
  const v1::JobEstimate basic = estimate("pa");
  EXPECT_EQ(basic.cost().epsilon(), 1.0);
  EXPECT_EQ(basic.cost().delta(), 0);
  EXPECT_EQ(basic.cost().guarantee_epsilon(), 1.0);
  // Under the RDP filter with budget (1, 1e-6) several such jobs fit, where
  // one pure epsilon-1 job would exhaust it.
  for (int i = 0; i < 3; ++i) {
    const v1::JobResult r = RunToResult(Spec(PaSpec("pa-rdp", algo, 1.0)));
    EXPECT_EQ(r.model().weights_size(), kDim);
  }
  const v1::ListLedgerResponse ledger = Ledger("pa-rdp");
  ASSERT_EQ(ledger.entries_size(), 3);
  EXPECT_NEAR(ledger.entries(0).epsilon(), hand, 2e-12);
  EXPECT_LT(ledger.budget().epsilon_spent(), 1.0);
  EXPECT_TRUE(estimate("pa-rdp").admissible());
}

TEST_F(PiecewiseAffineTest, ReleasedOutputs) {
  v1::JobResult r = RunToResult(
      Spec(PaSpec("pa", R"("pa_subgradient": {"iterations": 30})")));
  std::map<std::string, int> sizes;
  for (const auto& o : r.released()) sizes[o.name()] = o.values_size();
  EXPECT_EQ(sizes["iterates"], 31 * kDim);
  EXPECT_EQ(sizes["indices"], 30);
  EXPECT_EQ(sizes["x_last"], kDim);
  EXPECT_EQ(sizes.count("objective"), 0u);  // never on private offsets
  r = RunToResult(Spec(PaSpec("pa", R"("pa_perturb_problem": {})")));
  ASSERT_EQ(r.released(0).name(), "b_tilde");
  EXPECT_EQ(r.released(0).values_size(), kPieces);
}

// M_E whose public cost bound is too high is refused before anything is
// charged (FAILED_PRECONDITION), and the budget is untouched.
TEST_F(PiecewiseAffineTest, InfeasibleExponentialIsRefusedBeforeCharging) {
  ASSERT_TRUE(
      server_.Import(MaxAffineHeader("pa-wide", false, 30.0), ProblemCsv())
          .ok());
  v1::Job job;
  const grpc::Status st =
      Submit(Spec(PaSpec("pa-wide", R"("pa_exponential": {})", 2.0)), &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), ::testing::HasSubstr("infeasible"));
  EXPECT_EQ(Ledger("pa-wide").entries_size(), 0);
}

// No silent saturation: offsets beyond the range the mechanisms represent
// exactly (2^27 b_max) are refused at import, told to the curator; public
// slopes and P whose score range G X exceeds 2^27 b_max are refused before
// charging (INVALID_ARGUMENT), the budget untouched.
TEST_F(PiecewiseAffineTest, OutOfRangeProblemsAreRefusedNotClamped) {
  std::string csv = ProblemCsv();
  csv.replace(csv.rfind(',') + 1, std::string::npos, "2e8\n");  // > 2^27
  const grpc::Status imported =
      server_.Import(MaxAffineHeader("pa-far", false), csv);
  EXPECT_EQ(imported.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(imported.error_message(), ::testing::HasSubstr("2^27 b_max"));
  // P = [-1e8, 1e8]^d: G X ~ 1e8 sqrt(d) G > 2^27.
  ASSERT_TRUE(
      server_.Import(MaxAffineHeader("pa-huge", false, 1e8), ProblemCsv())
          .ok());
  for (const char* algorithm :
       {R"("pa_perturb_problem": {})", R"("pa_perturb_solution": {})",
        R"("pa_subgradient": {})", R"("pa_exponential": {})"}) {
    SCOPED_TRACE(algorithm);
    v1::Job job;
    const grpc::Status st = Submit(Spec(PaSpec("pa-huge", algorithm)), &job);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << st.error_message();
    EXPECT_THAT(st.error_message(), ::testing::HasSubstr("2^27 b_max"));
  }
  EXPECT_EQ(Ledger("pa-huge").entries_size(), 0);
}

TEST_F(PiecewiseAffineTest, RelationsAndJobTypesStayApart) {
  // A DP-SGD job on a max-affine dataset: refused (other relation).
  v1::Job job;
  grpc::Status st = Submit(
      Spec(R"({"dataset": "pa", "model": {"least_squares": {"label_bound": 1}},
               "privacy": {"epsilon": 0.5, "delta": 1e-6},
               "algorithm": {"dp_gd": {"steps": 2, "clip_norm": 1,
                                       "learning_rate": 0.1}}})"),
      &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A pa_* job on an ordinary dataset: refused.
  v1::ImportHeader plain;
  plain.set_name("plain");
  plain.set_format(v1::DATASET_FORMAT_CSV);
  plain.set_dimension(kDim);
  plain.set_label_type(v1::LABEL_TYPE_REAL);
  plain.set_label_last(true);
  plain.set_epsilon_budget(1);
  ASSERT_TRUE(server_.Import(plain, ProblemCsv()).ok());
  st = Submit(Spec(PaSpec("plain", R"("pa_perturb_problem": {})")), &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The non-private baseline: public datasets only.
  st =
      Submit(Spec(R"({"dataset": "pa", "algorithm": {"pa_solve": {}}})"), &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Ledger("pa").entries_size(), 0);
}

TEST_F(PiecewiseAffineTest, NonPrivateBaselinesOnAPublicCopy) {
  v1::JobResult lp = RunToResult(
      Spec(R"({"dataset": "pa-public", "algorithm": {"pa_solve": {}}})"));
  ASSERT_EQ(lp.released(0).name(), "objective");
  const double f_opt = lp.released(0).values(0);
  v1::JobResult sg = RunToResult(Spec(
      R"({"dataset": "pa-public", "algorithm": {"pa_solve": {
            "method": "PA_SOLVE_SUBGRADIENT",
            "subgradient": {"iterations": 200}}}})"));
  const v1::ReleasedOutput* objective = nullptr;
  for (const auto& o : sg.released()) {
    if (o.name() == "objective") objective = &o;
  }
  ASSERT_NE(objective, nullptr);
  ASSERT_EQ(objective->values_size(), 201);
  double best = objective->values(0);
  for (double v : objective->values()) {
    EXPECT_GE(v, f_opt - 1e-9);
    best = std::min(best, v);
  }
  EXPECT_LT(best - f_opt, 0.5);
  // A DP mechanism on a public dataset runs uncharged.
  v1::JobResult dp =
      RunToResult(Spec(PaSpec("pa-public", R"("pa_perturb_problem": {})")));
  EXPECT_FALSE(dp.cost().charged());
}

}  // namespace
}  // namespace dpopt::testing
