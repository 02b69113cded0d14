// Group commit of fully durable writes from concurrent threads.
//
// Each caller's unit of work runs under a SAVEPOINT of its own inside one
// `BEGIN IMMEDIATE` transaction, which the first waiting caller (the leader)
// opens, fills with every unit queued so far, and commits with
// synchronous=FULL for all of them. N concurrent callers then share one
// fsync instead of queueing for one each; a lone caller pays only the
// savepoint's two statements more than a transaction of its own.
//
// What each caller sees is what its own transaction would have given it:
//   * its unit runs under the write lock, after the units queued before it
//     (whose writes it sees), so a check-and-write unit (the ledger's
//     admission check and charge) is exactly as serialized as in a
//     transaction of its own;
//   * a unit that fails is rolled back to its savepoint alone and its
//     caller gets the unit's error; the others are unaffected;
//   * Run returns only after the shared COMMIT returned: OK means the
//     unit's writes are durable; if the COMMIT fails, every unit of the
//     batch gets that error and nothing of the batch is written;
//   * the caller's ScopedCommitHook (storage/sqlite.h: the RPC's audit
//     record) runs inside the unit's savepoint, so the change and its
//     record commit together or not at all, as with Transaction::Commit.
//
// Thread-safe. Obtain it from Database::group_commit().
#ifndef DPOPT_STORAGE_GROUP_COMMIT_H_
#define DPOPT_STORAGE_GROUP_COMMIT_H_

#include <cstdint>
#include <deque>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace dpopt::storage {

class Connection;
class Database;
class ScopedCommitHook;

class GroupCommit {
 public:
  // Runs on the leader's thread with the connection lock held, inside the
  // shared transaction. Must not call back into the Database's public
  // methods (they take the connection lock).
  using Unit = std::function<absl::Status(Connection&)>;
  // Most units in one transaction.
  static constexpr int kMaxUnitsPerCommit = 64;

  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Runs `unit` in a shared durable transaction (see above) and returns its
  // status, or the shared BEGIN's or COMMIT's error.
  absl::Status Run(const Unit& unit) ABSL_LOCKS_EXCLUDED(mu_);

  // `f` runs (connection lock held) when a shared transaction is rolled
  // back after some unit succeeded in it, before any caller returns: for
  // caches filled from writes that then never committed. Call once,
  // before concurrent use.
  void SetOnRollback(std::function<void()> f) { on_rollback_ = std::move(f); }

 private:
  friend class Database;
  explicit GroupCommit(Database& db) : db_(db) {}

  struct Request {
    const Unit* unit = nullptr;
    // The caller's commit hook, captured on its thread.
    ScopedCommitHook* hook = nullptr;
    absl::Status status;
    bool done = false;
  };
  // Runs `batch` in one transaction and sets each request's status.
  void Commit(const std::deque<Request*>& batch);

  Database& db_;
  std::function<void()> on_rollback_;
  absl::Mutex mu_;
  std::deque<Request*> queue_ ABSL_GUARDED_BY(mu_);
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_GROUP_COMMIT_H_
