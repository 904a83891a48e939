#include "tessera/common/error.h"

namespace tessera {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::NonFiniteInput: return "NonFiniteInput";
    case ErrorCode::BudgetExceeded: return "BudgetExceeded";
    case ErrorCode::RunnerFailed: return "RunnerFailed";
    case ErrorCode::Cancelled: return "Cancelled";
    case ErrorCode::Internal: return "Internal";
  }
  return "Internal";
}

}  // namespace tessera
