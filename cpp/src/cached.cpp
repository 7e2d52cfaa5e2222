#include "dpacct/cached.hpp"

#include <atomic>
#include <deque>
#include <mutex>
#include <utility>

namespace dpacct {

namespace {

struct Cache {
  std::mutex mutex;
  std::deque<std::pair<std::size_t, void*>> blocks;  // (bytes, block), the oldest first
  std::size_t bytes = 0;
};

std::atomic<int>& scopes() {
  static std::atomic<int> open{0};
  return open;
}

Cache& cache() {
  static Cache* const instance = new Cache();  // never destroyed: blocks may be released during exit
  return *instance;
}

// Frees the oldest kept block (the caller holds the lock; the cache is not empty).
void free_oldest(Cache& c) {
  c.bytes -= c.blocks.front().first;
  ::operator delete(c.blocks.front().second);
  c.blocks.pop_front();
}

}  // namespace

void* cached_allocate(std::size_t bytes) {
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    for (auto it = c.blocks.end(); it != c.blocks.begin();) {  // the most recent first
      --it;
      if (it->first == bytes) {
        void* block = it->second;
        c.blocks.erase(it);
        c.bytes -= bytes;
        return block;
      }
    }
    // A miss: kept blocks of other sizes give back at least as many bytes (the oldest first) before
    // the new block is taken, so that keeping them does not raise a query's peak memory.
    for (std::size_t freed = 0; freed < bytes && !c.blocks.empty();) {
      freed += c.blocks.front().first;
      free_oldest(c);
    }
  }
  return ::operator new(bytes);
}

void cached_release(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  const std::size_t most = holding() ? kCachedDuringQuery : kCachedAtMost;
  if (bytes > most) {
    ::operator delete(block);
    return;
  }
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    try {
      c.blocks.emplace_back(bytes, block);
    } catch (...) {  // no room to note it: free it
      ::operator delete(block);
      return;
    }
    c.bytes += bytes;
    while (c.bytes > most) free_oldest(c);
  }
}

void hold_begin() noexcept { scopes().fetch_add(1); }

bool hold_end() noexcept {
  // (Never below 0: an end without its begin changes nothing.)
  int open = scopes().load();
  while (open > 0 && !scopes().compare_exchange_weak(open, open - 1)) {
  }
  return open == 1;  // the value replaced, where one was
}

bool holding() noexcept { return scopes().load() > 0; }

void trim_cached() noexcept {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  while (c.bytes > kCachedAtMost) free_oldest(c);
}

std::size_t cached_bytes() noexcept {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

void release_cached() noexcept {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  while (!c.blocks.empty()) free_oldest(c);
}

}  // namespace dpacct
