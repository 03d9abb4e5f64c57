// SWEPT_ZMQ_CHECK(call): the one check macro for ZeroMQ calls (cppzmq), used
// by the scheduler's and the agent's sockets. cppzmq reports failures as
// zmq::error_t; the macro turns one into Status::Unavailable naming the file,
// line, call and errno text, so no exception leaves a module. The enclosing
// function returns Status or Result<T>. Header-only: only code that links
// cppzmq includes it (swept_common itself does not).
#pragma once

#include <string>
#include <zmq.hpp>

#include "common/status.h"

#define SWEPT_ZMQ_CHECK(call)                                                                          \
  do {                                                                                                 \
    try {                                                                                              \
      (void)(call);                                                                                    \
    } catch (const zmq::error_t& _swept_e) {                                                           \
      return ::swept::Status::Unavailable(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                                          #call + " failed: " + _swept_e.what());                       \
    }                                                                                                  \
  } while (0)
