#include "internal/job.h"

#include <system_error>

namespace tessera {

Job::Job(Body body, RunOptions options) {
  options.cancel = &cancel_;
  options.progress = [this](uint64_t done, uint64_t total) {
    total_.store(total);
    done_.store(done);
  };
  try {
    thread_ = std::thread([this, body = std::move(body), options] {
      try {
        report_ = body(options, bridge_);
        state_.store(State::Succeeded);
      } catch (const Error& e) {
        error_code_ = e.code();
        error_message_ = e.what();
        state_.store(State::Failed);
      } catch (const std::exception& e) {
        error_code_ = ErrorCode::Internal;
        error_message_ = e.what();
        state_.store(State::Failed);
      }
    });
  } catch (const std::system_error& e) {
    throw Error(ErrorCode::Internal, std::string("could not start the driver thread (") + e.what() +
                                         "): the pthread pool is exhausted; create the module with a larger "
                                         "pthreadPoolSize");
  }
}

Job::~Job() {
  cancel();
  join();
}

void Job::cancel() {
  cancel_.store(true);
  bridge_.close("cancelled");
}

void Job::join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera
