#include "storage/group_commit.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "storage/database.h"
#include "storage/sqlite.h"

namespace dpopt::storage {

absl::Status GroupCommit::Run(const Unit& unit) {
  Request mine;
  mine.unit = &unit;
  mine.hook = ScopedCommitHook::Current();
  absl::MutexLock lock(&mu_);
  queue_.push_back(&mine);
  while (!mine.done) {
    if (leading_) {
      auto ready = [&mine, this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return mine.done || !leading_;
      };
      mu_.Await(absl::Condition(&ready));
      continue;
    }
    // Lead: commit every queued request (ours among the first
    // kMaxUnitsPerCommit, since the queue is served in order).
    leading_ = true;
    std::deque<Request*> batch;
    while (!queue_.empty() &&
           static_cast<int>(batch.size()) < kMaxUnitsPerCommit) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    mu_.Unlock();
    Commit(batch);
    mu_.Lock();
    for (Request* r : batch) r->done = true;
    leading_ = false;
  }
  return mine.status;
}

void GroupCommit::Commit(const std::deque<Request*>& batch) {
  // The callers' hooks run inside their savepoints below; none runs at the
  // shared COMMIT (the leader's own included).
  ScopedCommitHookSuspension shared_commit;
  db_.WithConnection([&](Connection& conn) {
    Transaction txn(conn);
    absl::Status begun = txn.Begin(Transaction::Mode::kImmediate);
    if (!begun.ok()) {
      for (Request* r : batch) r->status = begun;
      return;
    }
    std::vector<Request*> written;
    // SQLite rolled the whole transaction back (an I/O error, a full disk)
    // or a savepoint could not be closed: nothing of the batch commits.
    const auto abandon = [&](Request* r, const absl::Status& why) {
      r->status = why;
      for (Request* w : written) w->status = why;
      if (!written.empty() && on_rollback_) on_rollback_();
      (void)txn.Rollback();
    };
    for (Request* r : batch) {
      r->status = conn.ExecuteCached("SAVEPOINT group_commit_unit");
      if (!r->status.ok()) continue;
      r->status = (*r->unit)(conn);
      ScopedCommitHook* hook = r->hook;
      if (r->status.ok() && hook != nullptr && !hook->running_) {
        hook->running_ = true;
        r->status = hook->hook_(conn);
        hook->running_ = false;
      }
      if (!conn.InTransaction()) {
        abandon(r, r->status.ok() ? absl::UnavailableError(
                                        "the shared transaction was rolled "
                                        "back; nothing was written")
                                  : r->status);
        return;
      }
      if (!r->status.ok()) {
        // This unit alone is undone (ROLLBACK TO keeps the savepoint open).
        absl::Status undone =
            conn.ExecuteCached("ROLLBACK TO group_commit_unit");
        if (undone.ok())
          undone = conn.ExecuteCached("RELEASE group_commit_unit");
        if (!undone.ok()) {
          abandon(r, r->status);
          return;
        }
        continue;
      }
      absl::Status released = conn.ExecuteCached("RELEASE group_commit_unit");
      if (!released.ok()) {
        abandon(r, released);
        return;
      }
      written.push_back(r);
    }
    if (written.empty()) {
      (void)txn.Rollback();
      return;
    }
    // synchronous=FULL: durable once COMMIT returns.
    absl::Status committed = txn.Commit();
    if (!committed.ok()) {
      for (Request* w : written) w->status = committed;
      if (on_rollback_) on_rollback_();
      return;
    }
    for (Request* w : written) {
      if (w->hook != nullptr) ++w->hook->commits_;
    }
  });
}

}  // namespace dpopt::storage
