// Calibration.noise_stddev has one meaning for every job type
// (proto/dpopt/v1/dpopt.proto): the standard deviation of the noise the job
// adds to each coordinate of the vector it privatizes, at its first noisy
// release, before any normalisation. Each job type's example
// (examples/TYPE.json, on the bundled data, imported as the server does) is
// calibrated and run, and the reported value is compared with the noise the
// run actually adds:
//  - jobs whose noise goes through the oracles' NoiseAdder: a recording adder
//    captures the sampler parameters of the first releases (and adds no
//    noise); the reported value must be the first release's sampler std,
//    and the real sampler with that plan must draw noise of that std;
//  - pa_perturb_problem / pa_perturb_solution (vector Laplace on the offsets
//    / the solution): the empirical std of the released vector over many
//    runs;
//  - job types without additive noise: 0, and no NoiseAdder release.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/noise/testing/seeded_random.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/algorithm.h"
#include "core/optim/private_oracle.h"
#include "core/optim/testing/noise_off.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/dataset_manager.h"
#include "server/spec_translation.h"
#include "storage/database.h"
#include "tests/common/status_matchers.h"
#include "tests/integration/test_server.h"

namespace dpopt::server {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;
using ::dpopt::testing::ExampleCsvHeader;
using ::dpopt::testing::ExampleLibsvmHeader;
using ::dpopt::testing::ExampleMaxAffineHeader;
using ::testing::HasSubstr;

constexpr char kStop[] = "noise_stddev_test: enough releases recorded";

std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("DPOPT_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/" + relative;
}

std::string Read(const std::string& relative) {
  std::FILE* f = std::fopen(SourcePath(relative).c_str(), "rb");
  EXPECT_NE(f, nullptr) << relative;
  if (f == nullptr) return "";
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// One NoiseAdder release as the job planned it.
struct Release {
  bool gaussian = true;
  noise::GaussianPlan gaussian_plan;
  noise::LaplacePlan laplace_plan;
  // The sampler's standard deviation per coordinate: sigma, or sqrt(2) b.
  double stddev = 0;
};

// Records each release's plan and adds nothing; fails the run after
// kMaxReleases releases (enough to compare, and the run stays short).
class RecordingNoise final : public optim::NoiseAdder {
 public:
  static constexpr size_t kMaxReleases = 20;

  absl::Status AddGaussian(const noise::GaussianPlan& plan,
                           noise::RandomSource&,
                           Eigen::Ref<Eigen::VectorXd>) const override {
    Release r;
    r.gaussian_plan = plan;
    r.stddev = plan.sigma;
    return Record(r);
  }
  absl::Status AddLaplace(const noise::LaplacePlan& plan, noise::RandomSource&,
                          Eigen::Ref<Eigen::VectorXd>) const override {
    Release r;
    r.gaussian = false;
    r.laplace_plan = plan;
    r.stddev = std::sqrt(2.0) * plan.scale;
    return Record(r);
  }

  const std::vector<Release>& releases() const { return releases_; }

 private:
  absl::Status Record(const Release& r) const {
    releases_.push_back(r);
    if (releases_.size() >= kMaxReleases) return absl::AbortedError(kStop);
    return absl::OkStatus();
  }
  mutable std::vector<Release> releases_;
};

// The empirical std of the real sampler's noise with the release's plan
// (at least 20,000 draws, on zero vectors).
double EmpiricalStddev(const Release& r, noise::RandomSource& rng) {
  const int64_t d =
      r.gaussian ? r.gaussian_plan.dimension : r.laplace_plan.dimension;
  const int64_t draws = 20000 / d + 1;
  double sum = 0, sum_sq = 0;
  int64_t n = 0;
  for (int64_t k = 0; k < draws; ++k) {
    Eigen::VectorXd v = Eigen::VectorXd::Zero(d);
    const absl::Status s =
        r.gaussian ? noise::AddGaussianNoise(r.gaussian_plan, rng, v)
                   : noise::AddLaplaceNoise(r.laplace_plan, rng, v);
    EXPECT_TRUE(s.ok()) << s;
    sum += v.sum();
    sum_sq += v.squaredNorm();
    n += d;
  }
  const double mean = sum / static_cast<double>(n);
  return std::sqrt(sum_sq / static_cast<double>(n) - mean * mean);
}

// The pooled per-coordinate std of samples (rows) around their mean.
double PooledStddev(const std::vector<Eigen::VectorXd>& samples) {
  const Eigen::Index d = samples.front().size();
  Eigen::VectorXd mean = Eigen::VectorXd::Zero(d);
  for (const Eigen::VectorXd& s : samples) mean += s;
  mean /= static_cast<double>(samples.size());
  double sq = 0;
  for (const Eigen::VectorXd& s : samples) sq += (s - mean).squaredNorm();
  return std::sqrt(sq / static_cast<double>((samples.size() - 1) * d));
}

class NoiseStddevTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(std::filesystem::temp_directory_path() /
                           absl::StrCat("dpopt-noise-stddev-", getpid()));
    std::filesystem::create_directories(*dir_);
    auto db = storage::Database::Open(*dir_ + "/dpopt.db");
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = db->release();
    auto manager = DatasetManager::Create(db_);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = manager->release();
    // The datasets the examples name, imported as examples/README.md says.
    ASSERT_OK(manager_
                  ->Import(ExampleLibsvmHeader("adult", false),
                           Read("data/adult/a9a"))
                  .status());
    ASSERT_OK(manager_
                  ->Import(ExampleLibsvmHeader("adult-test", true),
                           Read("data/adult/a9a.t"))
                  .status());
    ASSERT_OK(manager_
                  ->Import(ExampleCsvHeader("quadratic-q"),
                           Read("examples/data/quadratic_q.csv"))
                  .status());
    for (bool is_public : {false, true}) {
      ASSERT_OK(manager_
                    ->Import(ExampleMaxAffineHeader(
                                 is_public ? "max-affine-public" : "max-affine",
                                 is_public),
                             Read("examples/data/max_affine.csv"))
                    .status());
    }
  }
  static void TearDownTestSuite() {
    delete manager_;
    delete db_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  struct Job {
    TranslatedJob translated;
    optim::Calibration calibration;
    Dataset data;
  };

  // Translates and calibrates `spec` on its dataset.
  static absl::StatusOr<Job> Calibrated(const v1::JobSpec& spec) {
    ASSIGN_OR_RETURN(storage::DatasetRecord record,
                     db_->datasets().Get(spec.dataset()));
    Job job;
    ASSIGN_OR_RETURN(job.translated, TranslateJobSpec(spec, record.is_public,
                                                      record.num_classes));
    ASSIGN_OR_RETURN(job.calibration, job.translated.algorithm->Calibrate(
                                          DatasetManager::PublicInfoOf(record),
                                          job.translated.target));
    ASSIGN_OR_RETURN(job.data, db_->datasets().Load(spec.dataset()));
    return job;
  }

  static v1::JobSpec Example(const std::string& type) {
    v1::JobSpec spec;
    const auto st = google::protobuf::util::JsonStringToMessage(
        Read("examples/" + type + ".json"), &spec);
    EXPECT_TRUE(st.ok()) << st.message();
    return spec;
  }

  static std::string* dir_;
  static storage::Database* db_;
  static DatasetManager* manager_;
};

std::string* NoiseStddevTest::dir_ = nullptr;
storage::Database* NoiseStddevTest::db_ = nullptr;
DatasetManager* NoiseStddevTest::manager_ = nullptr;

std::vector<std::string> JobTypes() {
  const google::protobuf::OneofDescriptor* oneof =
      v1::AlgorithmSpec::descriptor()->FindOneofByName("algorithm");
  std::vector<std::string> out;
  for (int i = 0; i < oneof->field_count(); ++i) {
    out.push_back(oneof->field(i)->name());
  }
  return out;
}

// Job types whose releases may have different scales (several mechanisms,
// a multi-stage schedule, or budgets adapted during the run): only the first
// release is compared.
const std::set<std::string>& SeveralScales() {
  static const auto* const kTypes =
      new std::set<std::string>{"accel_dp_nag_opt",
                                "accel_dp_masg_opt",
                                "dp_blsgd",
                                "dp_blsgd_ac",
                                "dp_blgd",
                                "dp_bilevel",
                                "dp_bilevel_minibatch",
                                "dp_tune_regularization"};
  return *kTypes;
}

// Gradient job types: the first release's noise is on the clipped gradient
// sum, z C (Calibration.noise_multiplier z, clip_norm C), up to the grid's
// allowance.
const std::set<std::string>& GradientSum() {
  static const auto* const kTypes = new std::set<std::string>{
      "dp_gd",        "dp_sgd",           "accel_dp_gd",   "accel_dp_hb",
      "accel_dp_nag", "accel_dp_nag_opt", "accel_dp_masg", "accel_dp_masg_opt",
      "dp_blsgd",     "dp_blsgd_ac",      "dp_blgd",       "dp_dda"};
  return *kTypes;
}

// Vector Laplace on a released vector, sampled outside the NoiseAdder.
const std::set<std::string>& VectorLaplace() {
  static const auto* const kTypes =
      new std::set<std::string>{"pa_perturb_problem", "pa_perturb_solution"};
  return *kTypes;
}

// No additive noise: exponential mechanisms and non-private baselines.
const std::set<std::string>& NoAdditiveNoise() {
  static const auto* const kTypes = new std::set<std::string>{
      "gd", "pa_exponential", "pa_subgradient", "pa_solve"};
  return *kTypes;
}

TEST_F(NoiseStddevTest, EveryJobTypeReportsTheStddevOfTheNoiseItAdds) {
  for (const std::string& type : JobTypes()) {
    if (VectorLaplace().count(type) > 0) continue;  // the next test
    SCOPED_TRACE(type);
    ASSERT_OK_AND_ASSIGN(Job job, Calibrated(Example(type)));
    const optim::Calibration& c = job.calibration;
    RecordingNoise recorder;
    SeededRandomForTesting rng(7);
    optim::SolveContext context(&rng);
    SolveContextTestPeer::SetNoise(context, &recorder);
    absl::StatusOr<optim::SolveResult> run =
        job.translated.algorithm->Run(job.data, c, context);
    if (!run.ok()) {
      ASSERT_THAT(run.status().message(), HasSubstr(kStop)) << run.status();
    }
    const std::vector<Release>& releases = recorder.releases();
    if (NoAdditiveNoise().count(type) > 0) {
      EXPECT_EQ(c.noise_stddev, 0);
      EXPECT_TRUE(releases.empty());
      continue;
    }
    ASSERT_FALSE(releases.empty());
    EXPECT_GT(c.noise_stddev, 0);
    // Exactly the first release's sampler parameter...
    EXPECT_DOUBLE_EQ(c.noise_stddev, releases.front().stddev);
    // ... which is on the noised vector itself: for the gradient job types,
    // the clipped sum, whose noise is the noise multiplier times the clip
    // norm (up to the grid's allowance), not that over the batch size.
    if (GradientSum().count(type) > 0 && releases.front().gaussian) {
      EXPECT_NEAR(c.noise_stddev, c.noise_multiplier * c.clip_norm,
                  1e-3 * c.noise_stddev);
    }
    if (SeveralScales().count(type) == 0) {
      for (const Release& r : releases) {
        EXPECT_DOUBLE_EQ(r.stddev, c.noise_stddev);
      }
    }
    // And the real sampler with that plan draws noise of that std (5
    // standard errors: about 1% for Gaussian, 1.6% for Laplace draws).
    SeededRandomForTesting draws(11);
    const double tolerance = releases.front().gaussian ? 0.05 : 0.08;
    const double empirical = EmpiricalStddev(releases.front(), draws);
    std::printf(
        "%-24s noise_stddev %-12.6g first release's draws %-12.6g "
        "(%zu releases recorded)\n",
        type.c_str(), c.noise_stddev, empirical, releases.size());
    EXPECT_NEAR(empirical, c.noise_stddev, tolerance * c.noise_stddev);
  }
}

TEST_F(NoiseStddevTest, VectorLaplaceJobsReportTheStddevOfTheirRelease) {
  // pa_perturb_problem releases b~ = b + w: its noise is b~ - b.
  {
    ASSERT_OK_AND_ASSIGN(Job job, Calibrated(Example("pa_perturb_problem")));
    SeededRandomForTesting rng(3);
    optim::SolveContext context(&rng);
    std::vector<Eigen::VectorXd> noise;
    for (int run = 0; run < 400; ++run) {
      ASSERT_OK_AND_ASSIGN(
          optim::SolveResult r,
          job.translated.algorithm->Run(job.data, job.calibration, context));
      ASSERT_EQ(r.released.front().name, "b_tilde");
      const std::vector<double>& b = r.released.front().values;
      noise.push_back(Eigen::Map<const Eigen::VectorXd>(b.data(), b.size()) -
                      job.data.labels());
    }
    // 400 x 20 coordinates; the pooled std around the sample mean (which is
    // near 0: the noise is centred).
    std::printf("pa_perturb_problem noise_stddev %.6g, released noise %.6g\n",
                job.calibration.noise_stddev, PooledStddev(noise));
    EXPECT_NEAR(PooledStddev(noise), job.calibration.noise_stddev,
                0.08 * job.calibration.noise_stddev);
  }
  // pa_perturb_solution, raw: x~ = x* + w with x* fixed.
  {
    v1::JobSpec spec = Example("pa_perturb_solution");
    spec.mutable_algorithm()->mutable_pa_perturb_solution()->set_raw(true);
    ASSERT_OK_AND_ASSIGN(Job job, Calibrated(spec));
    SeededRandomForTesting rng(5);
    optim::SolveContext context(&rng);
    std::vector<Eigen::VectorXd> solutions;
    for (int run = 0; run < 1600; ++run) {
      ASSERT_OK_AND_ASSIGN(
          optim::SolveResult r,
          job.translated.algorithm->Run(job.data, job.calibration, context));
      solutions.push_back(r.model.weights);
    }
    std::printf("pa_perturb_solution noise_stddev %.6g, released noise %.6g\n",
                job.calibration.noise_stddev, PooledStddev(solutions));
    EXPECT_NEAR(PooledStddev(solutions), job.calibration.noise_stddev,
                0.08 * job.calibration.noise_stddev);
  }
}

}  // namespace
}  // namespace dpopt::server
