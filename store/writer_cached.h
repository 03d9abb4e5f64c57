// SWEPT_CACHED: the writer's statements, each prepared once per connection
// and kept (Connection::cached), named as a local `Statement&`. Private to
// the writer's files (writer*.cpp): it expands to a use of Writer::conn_.
#pragma once

#include "store/sqlite.h"

// A cached statement of the writer's connection, as `Statement& var`; on a
// failure to prepare, the enclosing function returns its Status.
#define SWEPT_CACHED(var, sql)                           \
  SWEPT_ASSIGN_OR_RETURN(var##_ptr, conn_->cached(sql)); \
  Statement& var = *var##_ptr
