// A run on a background thread, observed by polling: state, progress, the report or the error.
// The bindings start drivers as Jobs so the JavaScript thread stays free to serve the Bridge.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "internal/bridge.h"
#include "tessera/driver.h"
#include "tessera/error.h"

namespace tessera {

class Job {
 public:
  enum class State { Running, Succeeded, Failed };
  using Body = std::function<RunReport(const RunOptions& options, Bridge& bridge)>;

  // Starts body on a new thread with options carrying this job's progress and cancel flag.
  // options.progress and options.cancel are replaced. Throws Error(Internal) if no thread can start.
  Job(Body body, RunOptions options);
  // Cancels if still running and joins.
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Stops the run: sets the cancel flag and fails every open network request.
  void cancel();
  // Waits for the thread to end.
  void join();

  State state() const { return state_.load(); }
  uint64_t done() const { return done_.load(); }
  uint64_t total() const { return total_.load(); }
  Bridge& bridge() { return bridge_; }
  // Valid once state() is Succeeded.
  const RunReport& report() const { return report_; }
  // Valid once state() is Failed.
  ErrorCode error_code() const { return error_code_; }
  const std::string& error_message() const { return error_message_; }

 private:
  Bridge bridge_;
  std::atomic<bool> cancel_{false};
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> total_{0};
  std::atomic<State> state_{State::Running};
  RunReport report_;
  ErrorCode error_code_ = ErrorCode::Internal;
  std::string error_message_;
  std::thread thread_;
};

}  // namespace tessera
