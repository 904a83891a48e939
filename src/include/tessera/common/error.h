// Tessera's one exception type: a code for programs, a message for people.
#pragma once

#include <stdexcept>
#include <string>

namespace tessera {

enum class ErrorCode {
  InvalidArgument,  // bad sizes, zero dims, core 0, unknown model id ...
  NonFiniteInput,   // NaN or Inf in the field
  BudgetExceeded,   // a patch or a whole volume over the wasm memory limits
  RunnerFailed,     // the network (patch runner) failed or returned the wrong shape
  Cancelled,        // the caller's cancel flag stopped the run
  Internal,
};

// Stable name of a code, as JavaScript sees it ("InvalidArgument", ...).
const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace tessera
