// Deterministic data parallelism for volume loops: work is cut into fixed blocks whose size does not depend on the
// thread count, and reductions add the blocks' partial sums in block order, so results are bit-identical for any
// number of threads (and natively and in wasm, with -ffp-contract=off).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#ifdef __EMSCRIPTEN__
#include <pthread.h>

#include <cstdlib>

#include "tessera/common/budget.h"
#endif

namespace tessera {

// Elements per block of parallel_for / parallel_sum (fixed: it defines the order of a reduction's additions).
inline constexpr uint64_t kParallelBlock = 16384;

// The threads a call with `threads` uses (0 = hardware concurrency), at most one per block of n.
inline unsigned parallel_threads(uint64_t n, unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t blocks = std::max<uint64_t>(1, (n + kParallelBlock - 1) / kParallelBlock);
  return static_cast<unsigned>(std::min<uint64_t>(threads, blocks));
}

#ifdef __EMSCRIPTEN__
// The module's thread stacks (WASM_PTHREAD_STACK_BYTES each): allocated once and kept for the module's lifetime, so a
// run's threads neither leave stack-sized holes in the heap nor land in its holes; the plans count them
// (wasm_thread_heap_bytes). The runtime reserves its pool's at start (reserve_thread_stacks).
struct ThreadStacks {
  std::mutex mutex;
  std::vector<void*> idle;
  unsigned held = 0;  // allocated, idle or in use
};
inline ThreadStacks& thread_stacks() {
  static ThreadStacks s;
  return s;
}

// An idle stack, else a new one; null when the heap refuses one.
inline void* take_thread_stack() {
  ThreadStacks& s = thread_stacks();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.idle.empty()) {
    void* stack = s.idle.back();
    s.idle.pop_back();
    return stack;
  }
  void* stack = std::aligned_alloc(16, WASM_PTHREAD_STACK_BYTES);
  if (stack) ++s.held;
  return stack;
}

// stack came from take_thread_stack and no thread runs on it.
inline void give_back_thread_stack(void* stack) {
  ThreadStacks& s = thread_stacks();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.idle.push_back(stack);
}

// Allocates stacks until count are held (before any volume, they sit at the heap's bottom).
inline void reserve_thread_stacks(unsigned count) {
  ThreadStacks& s = thread_stacks();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.idle.reserve(count);
  while (s.held < count) {
    void* stack = std::aligned_alloc(16, WASM_PTHREAD_STACK_BYTES);
    if (!stack) return;
    s.idle.push_back(stack);
    ++s.held;
  }
}

// Calls (*f)() on a started thread.
template <typename F>
void* call_on_thread(void* f) {
  (*static_cast<F*>(f))();
  return nullptr;
}
#endif

// Runs work() on up to count threads, the calling thread included; threads the platform refuses (a full wasm
// pthread pool: std::system_error, or EAGAIN from pthread_create) are not used. Rethrows the first exception of any
// of them.
template <typename Work>
void run_on_threads(unsigned count, Work&& work) {
  if (count <= 1) {
    work();
    return;
  }
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto guarded = [&]() {
    try {
      work();
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
#ifdef __EMSCRIPTEN__
  // On the module's kept stacks (thread_stacks).
  std::vector<std::pair<pthread_t, void*>> started;
  started.reserve(count - 1);
  for (unsigned t = 1; t < count; ++t) {
    void* stack = take_thread_stack();
    if (!stack) break;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, WASM_PTHREAD_STACK_BYTES);
    pthread_t id;
    const int refused = pthread_create(&id, &attr, &call_on_thread<decltype(guarded)>, &guarded);
    pthread_attr_destroy(&attr);
    if (refused) {
      give_back_thread_stack(stack);
      break;
    }
    started.emplace_back(id, stack);
  }
  guarded();
  for (auto& [id, stack] : started) {
    pthread_join(id, nullptr);
    give_back_thread_stack(stack);
  }
#else
  std::vector<std::thread> started;
  started.reserve(count - 1);
  for (unsigned t = 1; t < count; ++t) {
    try {
      started.emplace_back(guarded);
    } catch (const std::system_error&) {
      break;
    }
  }
  guarded();
  for (auto& t : started) t.join();
#endif
  if (failure) std::rethrow_exception(failure);
}

// Calls body(begin, end) over [0, n) in blocks of kParallelBlock, on up to `threads` threads (0 = hardware).
// body is safe to call from several threads at once on disjoint ranges.
template <typename Body>
void parallel_for(uint64_t n, unsigned threads, Body&& body) {
  const uint64_t blocks = (n + kParallelBlock - 1) / kParallelBlock;
  if (blocks == 0) return;
  std::atomic<uint64_t> next{0};
  run_on_threads(parallel_threads(n, threads), [&]() {
    for (uint64_t b; (b = next.fetch_add(1)) < blocks;) {
      const uint64_t begin = b * kParallelBlock;
      body(begin, std::min(n, begin + kParallelBlock));
    }
  });
}

// Sum over [0, n) of term(i) in double: each block summed in index order, the blocks' sums added in block order.
// The same bits for any thread count.
// term is safe to call from several threads at once.
template <typename Term>
double parallel_sum(uint64_t n, unsigned threads, Term&& term) {
  const uint64_t blocks = (n + kParallelBlock - 1) / kParallelBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    double s = 0.0;
    for (uint64_t i = begin; i < end; ++i) s += static_cast<double>(term(i));
    partial[static_cast<size_t>(begin / kParallelBlock)] = s;
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace tessera
