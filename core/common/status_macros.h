// Small status helpers. Debian's Abseil (20220623) has no status macros, so
// they are defined once here for the whole project.
#ifndef DPOPT_CORE_COMMON_STATUS_MACROS_H_
#define DPOPT_CORE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DPOPT_STATUS_CONCAT_INNER_(x, y) x##y
#define DPOPT_STATUS_CONCAT_(x, y) DPOPT_STATUS_CONCAT_INNER_(x, y)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// if it is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status dpopt_status_ = (expr);         \
    if (!dpopt_status_.ok()) return dpopt_status_; \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>); on
// error returns its status, otherwise moves the value into `lhs`, which may be
// a declaration (`auto x`) or an existing variable.
#define ASSIGN_OR_RETURN(lhs, expr)                                            \
  ASSIGN_OR_RETURN_IMPL_(DPOPT_STATUS_CONCAT_(dpopt_statusor_, __LINE__), lhs, \
                         expr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // DPOPT_CORE_COMMON_STATUS_MACROS_H_
