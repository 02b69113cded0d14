// dp_dda on MPI through the real server: a server started with
// MPI settings runs DDA_EXECUTION_MPI jobs on mpirun ranks (production
// worker: secure generators); a rank that dies or hangs past the deadline
// ends the job FAILED and still charged, with every rank stopped; a cancel
// stops the ranks; too many ranks are refused before charging. (A server
// without MPI refuses MPI jobs before charging: distributed_dda_test.cc.)
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/optim/distributed_dda/testing/dp_dda_test_peer.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/common/processes.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

std::function<void(server::ServerOptions&)> WithMpi(
    const std::string& worker, std::vector<std::string> worker_args,
    absl::Duration timeout = absl::Seconds(600)) {
  return [=](server::ServerOptions& o) {
    optim::MpiSettings m;
    m.mpirun = "mpirun";
    m.worker = worker;
    m.mpirun_args = {"--oversubscribe"};
    m.worker_args = worker_args;
    m.timeout = timeout;
    m.max_ranks = 8;
    if (worker == DPOPT_DDA_TEST_WORKER) {
      // Tests only: the seeded worker for bit-identical comparisons.
      optim::distributed_dda::testing::MpiSettingsTestPeer::AllowTestingWorker(
          m);
    }
    o.mpi = m;
  };
}

// The test-only worker (seeded generators, NOT DP) can never be a server's
// worker: the start-up check refuses it unless a test allows it through the
// test-only peer, which the server binary does not link.
TEST(DistributedDdaMpiServerTest, RefusesTheTestingWorkerAtStartUp) {
  std::string worker = DPOPT_DDA_WORKER;
  TestServer s([&worker](server::ServerOptions& o) {
    optim::MpiSettings m;
    m.mpirun = "mpirun";
    m.worker = worker;
    o.mpi = m;
  });
  s.Stop();
  worker = DPOPT_DDA_TEST_WORKER;
  const absl::Status refused = s.TryStart();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("not the production dpopt-dda-worker"));
  worker = "/bin/true";  // exits 0, prints nothing
  EXPECT_EQ(s.TryStart().code(), absl::StatusCode::kFailedPrecondition);
  worker = DPOPT_DDA_WORKER;
  EXPECT_TRUE(s.TryStart().ok());
}

void ImportA9a(TestServer& s) {
  v1::ImportHeader h;
  h.set_name("adult");
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(123);
  h.set_label_type(v1::LABEL_TYPE_BINARY);
  h.set_epsilon_budget(10);
  h.set_delta_budget(1e-6);
  ASSERT_TRUE(s.Import(h, ReadFileOrDie(DataPath("data/adult/a9a"))).ok());
  h.set_name("adult-test");
  h.set_public_(true);
  h.clear_epsilon_budget();
  h.clear_delta_budget();
  ASSERT_TRUE(s.Import(h, ReadFileOrDie(DataPath("data/adult/a9a.t"))).ok());
}

v1::JobSpec MpiSpec(int64_t iterations, int ranks, int trace_every = 10) {
  const std::string json = absl::StrFormat(
      R"({"dataset": "adult", "model": {"hinge_svm": {"l2": 0.0005}},
          "privacy": {"epsilon": 1, "delta": 1e-6},
          "algorithm": {"dp_dda": {"nodes": 8, "iterations": %d,
              "batch_size": 8, "execution": "DDA_EXECUTION_MPI",
              "mpi_ranks": %d}},
          "evaluate_on": "adult-test", "trace_every": %d})",
      iterations, ranks, trace_every);
  v1::JobSpec spec;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &spec).ok());
  return spec;
}

double Spent(TestServer& s) {
  grpc::ClientContext ctx;
  v1::GetBudgetRequest req;
  req.set_dataset("adult");
  v1::BudgetStatus b;
  EXPECT_TRUE(s.budget().GetBudget(&ctx, req, &b).ok());
  return b.epsilon_spent();
}

std::string Submit(TestServer& s, const v1::JobSpec& spec) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  v1::Job job;
  const grpc::Status st = s.jobs().SubmitJob(&ctx, req, &job);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return job.id();
}

TEST(DistributedDdaMpiServerTest, MpiJobRunsOnRanksAndIsCharged) {
  TestServer s(WithMpi(DPOPT_DDA_WORKER, {}));
  ImportA9a(s);
  const std::string id = Submit(s, MpiSpec(1000, 4));
  const double charged = Spent(s);
  EXPECT_GT(charged, 0);
  const v1::Job done = s.WaitForJob(id);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  grpc::ClientContext ctx;
  v1::GetJobResultRequest req;
  req.set_id(id);
  v1::JobResult r;
  ASSERT_TRUE(s.jobs().GetJobResult(&ctx, req, &r).ok());
  ASSERT_EQ(r.model().weights_size(), 123);
  for (double w : r.model().weights()) ASSERT_TRUE(std::isfinite(w));
  EXPECT_EQ(r.trace_size(), 101);
  std::printf("MPI job (4 ranks): test accuracy %.4f\n",
              r.evaluation().accuracy());
  EXPECT_GT(r.evaluation().accuracy(), 0.78);
  EXPECT_EQ(Spent(s), charged);

  // More ranks than nodes or than the server allows: refused, not charged.
  grpc::ClientContext c2;
  v1::SubmitJobRequest too_many;
  *too_many.mutable_spec() = MpiSpec(1000, 9);
  v1::Job j2;
  const grpc::Status st = s.jobs().SubmitJob(&c2, too_many, &j2);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("mpi_ranks"));
  EXPECT_EQ(Spent(s), charged);
}

TEST(DistributedDdaMpiServerTest,
     DeadOrHangingRankFailsTheJobChargedAndStopped) {
  for (const std::string fault : {"die:2:30", "hang:1:30"}) {
    const std::string marker = absl::StrCat("--test-fault=", fault);
    // A rank that dies must surface as ABORTED well before a generous
    // deadline; a hanging rank runs into a short one (on a loaded machine
    // perhaps before pass 30; the outcome is the same).
    TestServer s(
        WithMpi(DPOPT_DDA_TEST_WORKER, {"--test-seed=1", marker},
                fault[0] == 'd' ? absl::Seconds(600) : absl::Seconds(8)));
    ImportA9a(s);
    const std::string id = Submit(s, MpiSpec(2000, 4));
    const double charged = Spent(s);
    EXPECT_GT(charged, 0);
    const v1::Job done = s.WaitForJob(id);
    EXPECT_EQ(done.state(), v1::JOB_STATE_FAILED) << fault;
    EXPECT_THAT(done.message(),
                HasSubstr(fault[0] == 'd' ? "ABORTED" : "DEADLINE"))
        << done.message();
    EXPECT_EQ(Spent(s), charged) << fault;  // still charged
    EXPECT_EQ(WaitUntilNoProcesses(marker), 0) << fault;
  }
}

TEST(DistributedDdaMpiServerTest, CancelStopsTheRanks) {
  // A job long enough to be cancelled while its ranks run.
  TestServer s(WithMpi(DPOPT_DDA_TEST_WORKER, {"--test-seed=424242"}));
  ImportA9a(s);
  const std::string id = Submit(s, MpiSpec(1'000'000, 4, 10000));
  // mpirun and 4 ranks carry the marker once the ranks have started.
  EXPECT_GE(WaitForProcesses("--test-seed=424242", 5, absl::Seconds(120)), 5);
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_id(id);
  v1::Job job;
  ASSERT_TRUE(s.jobs().CancelJob(&ctx, req, &job).ok());
  const v1::Job done = s.WaitForJob(id, 120);
  EXPECT_EQ(done.state(), v1::JOB_STATE_CANCELLED) << done.message();
  EXPECT_EQ(WaitUntilNoProcesses("--test-seed=424242"), 0);
}

}  // namespace
}  // namespace dpopt::testing
