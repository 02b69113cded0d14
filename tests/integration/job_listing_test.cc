// ListJobs pagination: page_size, page_token, newest_first, the
// analyst's own jobs in full pages, and clear errors for bad requests.
#include "server/job_listing.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::string Submit(v1::JobService::Stub& jobs, const std::string& dataset) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = QuickDpGdSpec(dataset, 0.1, 2);
  v1::Job job;
  grpc::Status s = jobs.SubmitJob(&ctx, req, &job);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return job.id();
}

grpc::Status List(v1::JobService::Stub& jobs, const v1::ListJobsRequest& req,
                  v1::ListJobsResponse* out) {
  grpc::ClientContext ctx;
  return jobs.ListJobs(&ctx, req, out);
}

// Every page of `req` in turn; the ids in order.
std::vector<std::string> AllPages(v1::JobService::Stub& jobs,
                                  v1::ListJobsRequest req, int* pages) {
  std::vector<std::string> ids;
  *pages = 0;
  for (int guard = 0; guard < 100; ++guard) {
    v1::ListJobsResponse page;
    grpc::Status s = List(jobs, req, &page);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) break;
    ++*pages;
    if (req.page_size() > 0) {
      EXPECT_LE(page.jobs_size(), req.page_size());
    }
    for (const v1::Job& j : page.jobs()) {
      ids.push_back(j.id());
      EXPECT_TRUE(j.spec().has_algorithm());  // full jobs, not stubs
    }
    if (page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  return ids;
}

class JobListingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        server_.Import(SmallCsvHeader("pub-a", 0, true), SmallCsv(50)).ok());
    ASSERT_TRUE(
        server_.Import(SmallCsvHeader("pub-b", 0, true), SmallCsv(50)).ok());
    for (int i = 0; i < 23; ++i) {
      ids_.push_back(Submit(server_.jobs(), i % 3 == 0 ? "pub-b" : "pub-a"));
    }
    for (const std::string& id : ids_) server_.WaitForJob(id);
  }
  TestServer server_;
  std::vector<std::string> ids_;  // submission order
};

TEST_F(JobListingTest, PagesCoverEveryJobOnceInOrder) {
  v1::ListJobsRequest req;
  req.set_page_size(5);
  int pages = 0;
  EXPECT_THAT(AllPages(server_.jobs(), req, &pages), ElementsAreArray(ids_));
  EXPECT_EQ(pages, 5);  // 5 + 5 + 5 + 5 + 3

  req.set_newest_first(true);
  std::vector<std::string> reversed(ids_.rbegin(), ids_.rend());
  EXPECT_THAT(AllPages(server_.jobs(), req, &pages),
              ElementsAreArray(reversed));

  // A page size that divides the count: the last full page says so.
  req.set_newest_first(false);
  req.set_page_size(23);
  EXPECT_THAT(AllPages(server_.jobs(), req, &pages), ElementsAreArray(ids_));
  EXPECT_EQ(pages, 1);
}

TEST_F(JobListingTest, DatasetFilterPagesAndDefaultPageSize) {
  std::vector<std::string> b;
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (i % 3 == 0) b.push_back(ids_[i]);
  }
  v1::ListJobsRequest req;
  req.set_dataset("pub-b");
  req.set_page_size(3);
  int pages = 0;
  EXPECT_THAT(AllPages(server_.jobs(), req, &pages), ElementsAreArray(b));
  EXPECT_EQ(pages, 3);  // 8 jobs

  // page_size 0 means the default (100): everything in one page here.
  v1::ListJobsResponse all;
  ASSERT_TRUE(List(server_.jobs(), v1::ListJobsRequest(), &all).ok());
  EXPECT_EQ(all.jobs_size(), 23);
  EXPECT_TRUE(all.next_page_token().empty());
}

TEST_F(JobListingTest, JobsCreatedBetweenPagesAreNeitherSkippedNorRepeated) {
  v1::ListJobsRequest req;
  req.set_page_size(10);
  v1::ListJobsResponse first;
  ASSERT_TRUE(List(server_.jobs(), req, &first).ok());
  ASSERT_EQ(first.jobs_size(), 10);
  const std::string later = Submit(server_.jobs(), "pub-a");
  server_.WaitForJob(later);
  req.set_page_token(first.next_page_token());
  req.set_page_size(100);
  v1::ListJobsResponse rest;
  ASSERT_TRUE(List(server_.jobs(), req, &rest).ok());
  std::vector<std::string> got;
  for (const auto& j : first.jobs()) got.push_back(j.id());
  for (const auto& j : rest.jobs()) got.push_back(j.id());
  std::vector<std::string> want = ids_;
  want.push_back(later);
  EXPECT_THAT(got, ElementsAreArray(want));
}

TEST_F(JobListingTest, AnalystsPageThroughTheirOwnJobsInFullPages) {
  const std::string token = server_.CreateAnalyst("alice");
  ASSERT_TRUE(server_.Grant("alice", "pub-a").ok());
  auto alice = v1::JobService::NewStub(TokenChannel(server_.target(), token));
  std::vector<std::string> mine;
  for (int i = 0; i < 7; ++i) mine.push_back(Submit(*alice, "pub-a"));
  for (const std::string& id : mine) server_.WaitForJob(id);
  v1::ListJobsRequest req;
  req.set_page_size(3);
  int pages = 0;
  EXPECT_THAT(AllPages(*alice, req, &pages), ElementsAreArray(mine));
  EXPECT_EQ(pages, 3);  // 3 + 3 + 1: the curator's jobs never fill a page
}

TEST_F(JobListingTest, BadRequestsAreInvalidArgument) {
  v1::ListJobsResponse out;
  v1::ListJobsRequest req;
  req.set_page_size(-1);
  grpc::Status s = List(server_.jobs(), req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("page_size"));

  req.set_page_size(0);
  req.set_page_token("not-a-token!");
  s = List(server_.jobs(), req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("page_token"));

  // A real token used with another dataset filter or order.
  v1::ListJobsRequest first;
  first.set_page_size(2);
  ASSERT_TRUE(List(server_.jobs(), first, &out).ok());
  ASSERT_FALSE(out.next_page_token().empty());
  v1::ListJobsRequest other = first;
  other.set_page_token(out.next_page_token());
  other.set_dataset("pub-b");
  s = List(server_.jobs(), other, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("another dataset"));
  other.set_dataset("");
  other.set_newest_first(true);
  s = List(server_.jobs(), other, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("other order"));
}

TEST(JobPageSizeTest, DefaultsAndClamps) {
  v1::ListJobsRequest req;
  EXPECT_EQ(server::JobPageSize(req), server::kDefaultJobPageSize);
  req.set_page_size(7);
  EXPECT_EQ(server::JobPageSize(req), 7);
  req.set_page_size(5000);
  EXPECT_EQ(server::JobPageSize(req), server::kMaxJobPageSize);
  auto f = server::JobPageFilter(req, "bob");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->limit, server::kMaxJobPageSize + 1);
  EXPECT_EQ(f->principal, "bob");
  EXPECT_TRUE(f->without_result);
}

}  // namespace
}  // namespace dpopt::testing
