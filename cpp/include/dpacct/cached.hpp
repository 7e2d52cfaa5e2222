// Large blocks of memory kept between queries. A composition allocates a few vectors of its
// grid's length (suffix sums, composed entries); fresh blocks of that size come from mmap,
// and the kernel zero-fills each page on first touch, which had cost up to a quarter of an
// epsilon query (sigma=4, q=0.01, T=1e4 at relative accuracy 3.4e-4: 10.2 -> 7.4 ms with the
// pages kept). Blocks of at least kCachedFrom bytes released by a CachedVector go to one
// process-wide cache of at most kCachedAtMost bytes (the most recently released kept, the
// oldest freed first) and serve later requests of exactly their size. A request the cache
// cannot serve first frees at least as many bytes of kept blocks (the oldest first), so the
// cache does not raise a query's peak memory. release_cached() frees them all. Thread-safe.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace dpacct {

inline constexpr std::size_t kCachedFrom = std::size_t{1} << 16;
inline constexpr std::size_t kCachedAtMost = std::size_t{64} << 20;
// While a query runs (between hold_begin() and the matching hold_end(), nested, from any thread) the
// cache keeps up to kCachedDuringQuery bytes: a query's compositions on grids of 2^22 points (seven
// vectors of 32 MiB each) then take the blocks of the ones before instead of fresh pages, which had been
// a fifth of such a query's CPU (kernel time zero-filling them). A miss still frees kept blocks first, so
// the query's peak is not raised; trim_cached() brings the cache back to kCachedAtMost after it.
inline constexpr std::size_t kCachedDuringQuery = std::size_t{512} << 20;

// A block of `bytes` (>= kCachedFrom) from the cache, or from operator new (may throw std::bad_alloc).
void* cached_allocate(std::size_t bytes);
// Hands a block from cached_allocate back: kept in the cache or freed.
void cached_release(void* block, std::size_t bytes) noexcept;
// The bytes the cache holds now, and a release of all of them.
std::size_t cached_bytes() noexcept;
void release_cached() noexcept;
// Query scopes: hold_end() returns whether no scope is open any more (then trim what was kept for it).
void hold_begin() noexcept;
bool hold_end() noexcept;
bool holding() noexcept;
// Frees the oldest kept blocks until at most kCachedAtMost bytes remain.
void trim_cached() noexcept;

template <class T>
struct CachedAllocator {
  using value_type = T;
  CachedAllocator() noexcept = default;
  template <class U>
  CachedAllocator(const CachedAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor): allocator rebind
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kCachedFrom) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(cached_allocate(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kCachedFrom) {
      ::operator delete(p);
    } else {
      cached_release(p, bytes);
    }
  }
  template <class U>
  bool operator==(const CachedAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const CachedAllocator<U>&) const noexcept { return false; }
};

template <class T>
using CachedVector = std::vector<T, CachedAllocator<T>>;

}  // namespace dpacct
